"""This machine's record of a remote session: its OpenSSH master processes.

Each master runs in a session of its own (Ctrl-C reaches tunnelbench, which closes them
in order), so a tunnelbench that is SIGKILLed leaves them running, each holding an SSH
login (one sshd session) on its host. The record lets ``lab clean --hosts FILE`` end
exactly those: one directory per session, private to the user, holding the control
sockets, ssh's logs and ``session.json`` (the run that made it, the hosts file, and each
master's PID, start time and control socket, written the moment it is started). A
master is ended by its PID only while that PID is still the process that was started
(same start time) and its command line still names the recorded control socket as
``ControlMaster=yes``; nothing is found by pattern.
"""

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tunnelbench.errors import UserError
from tunnelbench.lab.state import process_start_time
from tunnelbench.remote.host import owner, owner_alive

RECORD = "session.json"
#: Seconds a master has to end on SIGTERM before it is killed.
GRACE_S = 5.0


def state_root() -> Path:
    """Where the sessions of this user are recorded: root's in /run, another user's in
    their runtime directory (or a private directory of theirs in the temporary one);
    ``TUNNELBENCH_REMOTE_STATE_DIR`` instead, where it is set."""
    if given := os.environ.get("TUNNELBENCH_REMOTE_STATE_DIR"):
        return Path(given)
    if os.geteuid() == 0:
        return Path("/run/tunnelbench/remote")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "tunnelbench" / "remote"
    return Path(tempfile.gettempdir()) / f"tunnelbench-{os.geteuid()}" / "remote"


def private_root() -> Path:
    """:func:`state_root`, made if missing and checked to be this user's alone (the
    temporary directory is anyone's: another user could have made it first)."""
    root = state_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    for path in (root, root.parent):
        info = path.lstat()
        if info.st_uid != os.geteuid() or info.st_mode & 0o022 or not path.is_dir():
            raise UserError(
                f"{path}: not a private directory of this user (owner uid {info.st_uid},"
                f" mode {info.st_mode & 0o7777:o}); remove it or set XDG_RUNTIME_DIR"
            )
    return root


@dataclass
class Master:
    role: str
    destination: str
    pid: int
    start_time: int  # field 22 of /proc/PID/stat: this process, not a later one of its PID
    socket: str


@dataclass
class SessionRecord:
    """One remote session's record; :meth:`save` after every change."""

    directory: Path
    hosts_file: str
    owner: dict[str, object] = field(default_factory=owner)
    masters: list[Master] = field(default_factory=list)

    @classmethod
    def create(cls, tag: str, hosts_file: Path) -> "SessionRecord":
        directory = private_root() / tag
        directory.mkdir(mode=0o700)
        record = cls(directory, str(hosts_file.resolve()))
        record.save()
        return record

    @classmethod
    def load(cls, directory: Path) -> "SessionRecord":
        data = json.loads((directory / RECORD).read_text())
        masters = [Master(**m) for m in data["masters"]]
        return cls(directory, data["hosts_file"], data["owner"], masters)

    def save(self) -> None:
        data = {
            "hosts_file": self.hosts_file,
            "owner": self.owner,
            "masters": [asdict(m) for m in self.masters],
        }
        tmp = self.directory / f"{RECORD}.tmp"
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.directory / RECORD)

    def add(self, role: str, destination: str, pid: int, socket: Path) -> None:
        start = process_start_time(pid) or 0
        self.masters.append(Master(role, destination, pid, start, str(socket)))
        self.save()

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def is_master(master: Master) -> bool:
    """Whether ``master.pid`` is still the master that was recorded: the same start time,
    a command line naming its control socket as the master's."""
    if process_start_time(master.pid) != master.start_time:
        return False
    try:
        argv = Path(f"/proc/{master.pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{master.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    words = {w.decode(errors="replace") for w in argv}
    return state != "Z" and f"ControlPath={master.socket}" in words and "ControlMaster=yes" in words


def end(master: Master) -> bool:
    """End one recorded master (SIGTERM, then SIGKILL); whether it had to be ended."""
    if not is_master(master):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(master.pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while is_master(master) and time.monotonic() < deadline:
        time.sleep(0.05)
    if is_master(master):
        with contextlib.suppress(ProcessLookupError):
            os.kill(master.pid, signal.SIGKILL)
    return True


def clean(hosts_file: Path) -> list[str]:
    """End the SSH masters that killed runs with ``hosts_file`` left running, and remove
    their records; what was done, one line each."""
    root = state_root()
    if not root.is_dir():
        return []
    wanted = str(hosts_file.resolve())
    said = []
    for directory in sorted(root.iterdir()):
        try:
            record = SessionRecord.load(directory)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a session's (or one that is being made this instant)
        if record.hosts_file != wanted:
            continue
        if owner_alive(record.owner):
            said.append(
                f"this machine: {directory}: left alone: its run is still running"
                f" (pid {record.owner.get('pid')})"
            )
            continue
        for master in record.masters:
            where = f"{master.role}: the SSH master of a killed run (pid {master.pid})"
            if end(master):
                said.append(f"{where}: ended; its login on {master.destination} with it")
        record.remove()
    return said
