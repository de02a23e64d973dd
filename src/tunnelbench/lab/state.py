"""The record of everything a lab created, kept on disk so any process can remove it.

Each resource is written to the state file *before* it is created, so a crash between
the two leaves a record and never an orphan. Teardown removes exactly what is recorded:
processes by PID (checked against their recorded start time, so a reused PID is never
hit), namespaces by name, files, directories and cgroups by path. Nothing is found by
pattern.

A process is recorded just *after* it is spawned, so a SIGKILL of tunnelbench in between
would leave a process no PID record names. Every lab process runs inside one of the
lab's named namespaces (``ip netns exec`` enters it before it executes the program, and
the program's children inherit it), and each namespace is recorded before it is
created: so before a namespace is deleted, every process still inside it (found by the
namespace's inode, ``/proc/PID/ns/net``, as ``ip netns pids`` does) is ended by PID
through a pidfd, which cannot hit a reused PID. That also ends daemons that forked away
from their recorded parent. The namespace is the marker: no wrapper, no environment
variable, no cgroup that must be made before each spawn.

State is acted on only when no other user could have written it (:func:`check_private`):
``lab clean`` ends the processes and deletes the namespaces and files a state names, so a
state directory another user can write (``TUNNELBENCH_STATE_DIR`` pointed at a shared
directory) would let that user have root end any process and delete any file.

The state also records its owner (the PID and start time of the tunnelbench process
that built the lab), so ``lab clean`` can tell a lab left behind by a dead process from
one a live run is measuring in.
"""

import contextlib
import ctypes
import errno
import json
import logging
import os
import select
import shutil
import signal
import stat
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tunnelbench.errors import UserError
from tunnelbench.system.netns_files import NETNS_DIR

log = logging.getLogger("tunnelbench.lab")

STATE_ROOT = Path(os.environ.get("TUNNELBENCH_STATE_DIR", "/run/tunnelbench/labs"))


class UntrustedState(UserError):
    """A lab state that another user than this one could have written."""


def check_private(path: Path) -> None:
    """Refuse ``path`` (the state directory, a lab's directory or its state file) unless
    this user or root owns it (a user reads root's labs with ``lab status``; root's own
    state is root's) and no group or other user may write it, and unless no
    directory above it lets another user replace it (writable by them, without the
    sticky bit). Raises :class:`UntrustedState` naming the path and why."""
    euid = os.geteuid()
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    why = None
    if stat.S_ISLNK(info.st_mode):
        why = "is a symbolic link"
    elif info.st_uid not in (euid, 0):
        why = f"is owned by uid {info.st_uid}, neither root nor uid {euid} (this user)"
    elif info.st_mode & 0o022:
        why = f"is writable by its group or by others (mode {stat.S_IMODE(info.st_mode):o})"
    if why is None and path == STATE_ROOT:
        for above in path.absolute().parents:
            mode = os.stat(above).st_mode
            if mode & 0o022 and not mode & stat.S_ISVTX:
                why = (
                    f"is in {str(above)!r}, which its group or others may write"
                    f" (mode {stat.S_IMODE(mode):o}, no sticky bit)"
                )
                break
    if why is not None:
        raise UntrustedState(
            f"lab state {str(path)!r} {why}: another user could have written what it"
            " names, so it is not acted on (is TUNNELBENCH_STATE_DIR a shared directory?)"
        )


@dataclass
class ProcessRecord:
    pid: int
    start_time: int  # field 22 of /proc/PID/stat: identifies this process, not just its PID
    argv: list[str]


@dataclass
class GuestRecord:
    """A VM guest (:mod:`tunnelbench.vm.machine`): the exchange directory it shares with
    the host, recorded before it is made, and the process group of virtme-ng and QEMU
    (its leader's PID and start time), recorded before virtme-ng is let start."""

    exchange: str
    pid: int = 0
    start_time: int = 0


@dataclass
class RoleLimitsRecord:
    """The cgroups of a lab's per-role CPU budgets (``lab.budget``), as its trials record
    them (:class:`tunnelbench.model.records.Resolved` has the same fields)."""

    cgroup_version: int
    cpu_period_us: int
    role_quotas_us: dict[str, int]
    role_cgroups: dict[str, str]


@dataclass
class LabFacts:
    """What building the lab set and found out, each written by the step that made it
    (:mod:`tunnelbench.lab.netns`; ``lab up`` adds its tunnel's), kept in the state file
    and read into each trial's record by the runner."""

    #: ``origin>peer`` -> the device of origin's link to peer.
    interfaces: dict[str, str] = field(default_factory=dict)
    #: role -> feature -> on, when the lab set offloads (see lab.netns.role_offloads).
    offloads: dict[str, dict[str, bool]] | None = None
    #: role -> the gso_max_segs set on its links, where the lab turned GSO off.
    gso_max_segs: dict[str, int] | None = None
    #: role -> the cores its processes are held to (lab.placement).
    placement: dict[str, str] | None = None
    #: role -> the receive-packet-steering mask of its links (lab.queues).
    rps: dict[str, str] | None = None
    #: role -> the one core a PPPoE session's WAN receive is held to.
    rps_pppoe_wan: dict[str, str] | None = None
    #: role -> its PPPoE session, on a WAN over PPPoE (lab.pppoe).
    pppoe: dict[str, dict[str, str | int]] | None = None
    role_budgets: RoleLimitsRecord | None = None
    #: ``lab up``'s tunnel: its kind, implementation, MTU and role -> device.
    tunnel: str | None = None
    implementation: str | None = None
    tunnel_mtu: int | None = None
    tunnel_devices: dict[str, str] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LabFacts":
        """From a state file (its ``info`` before these were typed); keys this version
        does not know are left out."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if isinstance(budgets := values.get("role_budgets"), dict):
            values["role_budgets"] = RoleLimitsRecord(**budgets)
        return cls(**values)


@dataclass
class LabState:
    lab_id: str
    topology: str = ""
    namespaces: list[str] = field(default_factory=list)
    processes: list[ProcessRecord] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    facts: LabFacts = field(default_factory=LabFacts)
    # Directories of cgroups the lab created (absent from state files written before
    # cgroups existed: the default applies).
    cgroups: list[str] = field(default_factory=list)
    # Directories the lab created inside its own directory (e.g. a daemon's private
    # run directory); removed, once empty, after the files.
    directories: list[str] = field(default_factory=list)
    # The process that built the lab, {"pid", "start_time"} (absent from state files
    # written before owners were recorded: such a lab counts as having a dead owner).
    owner: dict[str, int] | None = None
    # VM guests: a state of their own records each (see GuestRecord).
    guests: list[GuestRecord] = field(default_factory=list)

    @property
    def directory(self) -> Path:
        return STATE_ROOT / self.lab_id

    @property
    def path(self) -> Path:
        return self.directory / "state.json"

    def save(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(self.path)

    @classmethod
    def load(cls, lab_id: str) -> "LabState":
        """The recorded state of a lab; :class:`PermissionError` when this user may not
        read it (labs are built by root and their directories are private), and
        :class:`UntrustedState` when another user could have written it."""
        for path in (STATE_ROOT, STATE_ROOT / lab_id, STATE_ROOT / lab_id / "state.json"):
            check_private(path)
        data = json.loads((STATE_ROOT / lab_id / "state.json").read_text())
        data["processes"] = [ProcessRecord(**p) for p in data["processes"]]
        data["guests"] = [GuestRecord(**g) for g in data.get("guests", [])]
        data["facts"] = LabFacts.from_dict(data.pop("facts", None) or data.pop("info", {}))
        return cls(**data)

    def owner_alive(self) -> bool:
        """Whether the process that built this lab still runs (a reused PID is not it)."""
        if not self.owner:
            return False
        started = process_start_time(self.owner["pid"])
        return started is not None and started == self.owner["start_time"]

    def owner_description(self) -> str:
        """``pid 1234 (tunnelbench run --quick)``: who holds the lab, for messages."""
        if not self.owner:
            return "no recorded owner"
        pid = self.owner["pid"]
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            text = " ".join(w.decode(errors="replace") for w in words if w)
        except OSError:
            text = ""
        return f"pid {pid} ({text[:80]})" if text else f"pid {pid}"

    def add_namespace(self, name: str) -> None:
        self.namespaces.append(name)
        self.save()

    def add_file(self, path: Path) -> None:
        self.files.append(str(path))
        self.save()

    def add_directory(self, path: Path) -> None:
        self.directories.append(str(path))
        self.save()

    def add_cgroup(self, path: Path) -> None:
        self.cgroups.append(str(path))
        self.save()

    def add_process(self, pid: int, argv: list[str]) -> ProcessRecord:
        record = ProcessRecord(pid=pid, start_time=process_start_time(pid) or 0, argv=argv)
        self.processes.append(record)
        self.save()
        return record


def known_labs() -> list[str]:
    """Lab ids with a state file, oldest first.

    A lab directory this user may not look into (labs are root's, their directories
    private) is listed too: its state cannot be read, but the lab is there.
    """
    if not STATE_ROOT.is_dir():
        return []
    labs = []
    for path in STATE_ROOT.iterdir():
        try:
            if (path / "state.json").is_file():
                labs.append(path)
        except PermissionError:
            labs.append(path)
    return [p.name for p in sorted(labs, key=lambda p: p.stat().st_mtime)]


def current_owner() -> dict[str, int]:
    """This process, as the owner of a lab it builds: PID and start time."""
    return {"pid": os.getpid(), "start_time": process_start_time(os.getpid()) or 0}


def process_start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return int(stat.rsplit(")", 1)[1].split()[19])


def is_alive(record: ProcessRecord) -> bool:
    started = process_start_time(record.pid)
    if started is None or started != record.start_time:
        return False
    # A zombie is dead for our purposes; it only waits for its parent to reap it. Reaped
    # since the first read: dead too.
    return not _zombie(record.pid)


def stop_process(record: ProcessRecord, grace: float = 2.0) -> None:
    """End one recorded process: SIGTERM, then SIGKILL after ``grace`` seconds."""
    if not is_alive(record):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not is_alive(record):
            return
        time.sleep(0.02)
    log.warning("process %d (%s) ignored SIGTERM; killing it", record.pid, record.argv[0])
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGKILL)


def teardown(state: LabState, swept: list[str] | None = None) -> list[str]:
    """Remove everything the state records; return the problems met (empty when clean).

    Processes found inside the lab's namespaces that no record named (see the module's
    docstring) are ended too, and described in ``swept`` when it is given.

    Ctrl-C during teardown does not stop it half-way (that would leave exactly the
    debris teardown exists to remove): the removal is finished, then the interrupt is
    raised. Each step skips what is already gone, so starting over is safe.
    """
    interrupted = False
    while True:
        try:
            problems = _remove_all(state, swept if swept is not None else [], swept is None)
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt
    return problems


#: Further rounds of ending a namespace's processes when the first left some inside.
NEWCOMER_ROUNDS = 2


def _remove_all(state: LabState, swept: list[str], warn: bool) -> list[str]:
    problems: list[str] = []
    for guest in state.guests:
        problems += end_guest(guest)
    for record in reversed(state.processes):
        try:
            stop_process(record)
        except OSError as exc:
            problems.append(f"process {record.pid}: {exc}")
    existing = set(list_namespaces())
    for name in reversed(state.namespaces):
        if name not in existing:
            continue
        ended, left = end_namespace_processes(name)
        for _ in range(NEWCOMER_ROUNDS):
            if not left:
                break
            # A process that entered after the scan (a probe's last short read, started
            # as Ctrl-C arrived) is ended by the next round; one that outlives SIGKILL
            # stays listed and keeps its namespace.
            more, left = end_namespace_processes(name)
            ended += more
        for pid, comm in ended:
            if (text := f"pid {pid} ({comm}) in {name}") not in swept:
                swept.append(text)
                if warn:
                    log.warning("ended process %s: it had no PID record", text)
        if left:
            pids = ", ".join(f"{pid} ({comm})" for pid, comm in left)
            problems.append(f"namespace {name}: processes still inside: {pids}")
            continue
        # Gone all the same when another teardown (the run's own, beside `lab clean
        # --force`) deleted it first.
        if (problem := delete_namespace(name)) and name in list_namespaces():
            problems.append(f"namespace {name}: {problem}")
    for name in state.files:
        path = Path(name)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    for name in reversed(state.directories):
        try:
            Path(name).rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:
            problems.append(f"directory {name}: {exc.strerror}")
    for name in reversed(state.cgroups):
        if problem := remove_cgroup(Path(name)):
            problems.append(problem)
    if not problems:
        for leftover in state.directory.glob("*"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        with contextlib.suppress(FileNotFoundError, OSError):
            state.directory.rmdir()
    return problems


#: What a guest's exchange directory is called (vm.machine makes them), the one kind of
#: directory a guest record may have removed with what it holds.
GUEST_EXCHANGE_PREFIX = "guest-"


def end_guest(guest: GuestRecord, grace: float = 5.0) -> list[str]:
    """End a recorded guest's process group (virtme-ng, QEMU and what they started) and
    remove its exchange directory; return the problems met.

    The group is found by its leader's PID, checked against the recorded start time
    while the leader lives. With the leader gone, its group's other members are the
    processes of that process group and session that started no earlier than it did (the
    kernel does not hand out a PID that is still a live group's id)."""
    problems: list[str] = []
    if guest.pid > 0:
        for signum in (signal.SIGTERM, signal.SIGKILL):
            members = _group_members(guest)
            if not members:
                break
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
            deadline = time.monotonic() + grace
            while _group_members(guest) and time.monotonic() < deadline:
                time.sleep(0.05)
        if left := _group_members(guest):
            problems.append(f"guest {guest.pid}: processes still running: {left}")
    exchange = Path(guest.exchange)
    if exchange.name.startswith(GUEST_EXCHANGE_PREFIX) and not exchange.is_symlink():
        shutil.rmtree(exchange, ignore_errors=True)
        if exchange.exists():
            problems.append(f"guest exchange directory {exchange}: could not be removed")
    return problems


def _group_members(guest: GuestRecord) -> list[int]:
    """The live processes of a recorded guest's process group (see :func:`end_guest`)."""
    leader = process_start_time(guest.pid)
    if leader is not None and leader != guest.start_time:
        return []  # the PID is another process's now: the group is gone
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields_ = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, group, started = fields_[0], (int(fields_[2]), int(fields_[3])), int(fields_[19])
        if group == (guest.pid, guest.pid) and state != "Z" and started >= guest.start_time:
            members.append(int(entry.name))
    return members


def remove_cgroup(path: Path, wait: float = 2.0) -> str | None:
    """Remove one recorded cgroup directory; return the problem, or None when it is gone.

    Its processes have been ended already; threads of a killed process may still be
    exiting for a moment, which keeps the cgroup busy, so a busy cgroup is retried.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            path.rmdir()
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return f"cgroup {path}: {exc.strerror}"
        time.sleep(0.02)


def namespace_processes(name: str) -> list[int]:
    """PIDs of the live processes inside the named network namespace, by its inode (what
    ``ip netns pids NAME`` lists), without this process. Empty when it does not exist."""
    try:
        target = os.stat(f"/run/netns/{name}")
    except OSError:
        return []
    inside = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            ns = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue  # gone, or a kernel thread
        if (ns.st_dev, ns.st_ino) == (target.st_dev, target.st_ino) and not _zombie(
            int(entry.name)
        ):
            inside.append(int(entry.name))
    return inside


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def end_namespace_processes(
    name: str, grace: float = 2.0
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """End every process inside the namespace ``name``: SIGTERM, then SIGKILL after
    ``grace`` seconds. Return the (pid, command) of those ended and of any still inside.

    Each process is held by a pidfd opened before its namespace is checked again, so the
    signal reaches the process that was found inside, never a later holder of its PID.
    """
    held: dict[int, tuple[int, str]] = {}  # pid -> (pidfd, comm)
    try:
        for pid in namespace_processes(name):
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            if _inside(name, pid):
                held[pid] = (fd, _comm(pid))
                _signal(fd, signal.SIGTERM)
            else:
                os.close(fd)
        deadline = time.monotonic() + grace
        running = dict(held)
        while running and time.monotonic() < deadline:
            running = {p: v for p, v in running.items() if not _exited(v[0])}
            if running:
                time.sleep(0.02)
        for fd, _ in running.values():
            _signal(fd, signal.SIGKILL)
        deadline = time.monotonic() + grace
        while running and time.monotonic() < deadline:
            running = {p: v for p, v in running.items() if not _exited(v[0])}
            if running:
                time.sleep(0.02)
        ended = [(p, comm) for p, (_, comm) in held.items() if p not in running]
        left = [(p, comm) for p, (_, comm) in running.items()]
        # A process that entered the namespace after the scan (it cannot be one of ours:
        # the lab's owner is gone or finished starting processes) is still listed.
        left += [(p, _comm(p)) for p in namespace_processes(name) if p not in held]
        return ended, left
    finally:
        for fd, _ in held.values():
            os.close(fd)


def _inside(name: str, pid: int) -> bool:
    """Whether process ``pid`` is (still) inside the namespace ``name``."""
    try:
        target = os.stat(f"/run/netns/{name}")
        ns = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return False
    return (ns.st_dev, ns.st_ino) == (target.st_dev, target.st_ino)


def _signal(pidfd: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(pidfd, signum)


def _exited(pidfd: int) -> bool:
    """A pidfd polls readable once its process has exited (a zombie counts)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


#: linux/fs.h: detach the mount now, free it once nothing uses it (as `ip netns delete`).
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def delete_namespace(name: str) -> str | None:
    """What ``ip netns delete NAME`` does, without its process (a VM guest takes
    0.2-0.5 s to start each): detach the namespace's bind mount, then remove its file.
    The namespace itself goes once no process or mount holds it. None when done, else
    why not."""
    if not name or "/" in name or name in (".", ".."):
        return f"{name!r} is not a namespace name"
    path = NETNS_DIR / name
    # Not mounted any more (a half-finished delete) is no failure: the unlink decides.
    _libc.umount2(str(path).encode(), MNT_DETACH)
    try:
        path.unlink()
    except OSError as exc:
        return f'cannot remove namespace file "{path}": {exc.strerror}'
    return None


def list_namespaces() -> list[str]:
    return sorted(p.name for p in NETNS_DIR.iterdir()) if NETNS_DIR.is_dir() else []
