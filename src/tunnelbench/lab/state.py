"""The record of everything a lab created, kept on disk so any process can remove it.

Each resource is written to the state file *before* it is created, so a crash between
the two leaves a record and never an orphan. Teardown removes exactly what is recorded:
processes by PID (checked against their recorded start time, so a reused PID is never
hit), namespaces by name, files, directories and cgroups by path. Nothing is found by
pattern.
"""

import contextlib
import errno
import json
import logging
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tunnelbench.command import run

log = logging.getLogger("tunnelbench.lab")

STATE_ROOT = Path(os.environ.get("TUNNELBENCH_STATE_DIR", "/run/tunnelbench/labs"))


@dataclass
class ProcessRecord:
    pid: int
    start_time: int  # field 22 of /proc/PID/stat: identifies this process, not just its PID
    argv: list[str]


@dataclass
class LabState:
    lab_id: str
    topology: str = ""
    namespaces: list[str] = field(default_factory=list)
    processes: list[ProcessRecord] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    info: dict[str, object] = field(default_factory=dict)
    # Directories of cgroups the lab created (absent from state files written before
    # cgroups existed: the default applies).
    cgroups: list[str] = field(default_factory=list)
    # Directories the lab created inside its own directory (e.g. a daemon's private
    # run directory); removed, once empty, after the files.
    directories: list[str] = field(default_factory=list)

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
        data = json.loads((STATE_ROOT / lab_id / "state.json").read_text())
        data["processes"] = [ProcessRecord(**p) for p in data["processes"]]
        return cls(**data)

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
    """Lab ids with a state file, oldest first."""
    if not STATE_ROOT.is_dir():
        return []
    labs = [p for p in STATE_ROOT.iterdir() if (p / "state.json").is_file()]
    return [p.name for p in sorted(labs, key=lambda p: p.stat().st_mtime)]


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
    # A zombie is dead for our purposes; it only waits for its parent to reap it.
    state = Path(f"/proc/{record.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


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


def teardown(state: LabState) -> list[str]:
    """Remove everything the state records; return the problems met (empty when clean).

    Ctrl-C during teardown does not stop it half-way (that would leave exactly the
    debris teardown exists to remove): the removal is finished, then the interrupt is
    raised. Each step skips what is already gone, so starting over is safe.
    """
    interrupted = False
    while True:
        try:
            problems = _remove_all(state)
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt
    return problems


def _remove_all(state: LabState) -> list[str]:
    problems: list[str] = []
    for record in reversed(state.processes):
        try:
            stop_process(record)
        except OSError as exc:
            problems.append(f"process {record.pid}: {exc}")
    existing = set(list_namespaces())
    for name in reversed(state.namespaces):
        if name not in existing:
            continue
        done = run(["ip", "netns", "delete", name], check=False)
        if done.returncode != 0:
            problems.append(f"namespace {name}: {done.stderr.strip()}")
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
            leftover.unlink()
        with contextlib.suppress(FileNotFoundError, OSError):
            state.directory.rmdir()
    return problems


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


def list_namespaces() -> list[str]:
    netns_dir = Path("/run/netns")
    return sorted(p.name for p in netns_dir.iterdir()) if netns_dir.is_dir() else []
