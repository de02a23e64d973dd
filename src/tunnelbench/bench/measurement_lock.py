"""One measurement at a time on this machine: a host-wide lock held while a run measures.

Two runs at once share the CPU and each stores figures 38-65% too low as if they were
true (no tunnel, 4 streams: 9,427 and 11,441 Mbit/s side by side against 26,653 alone).
A run therefore takes an exclusive ``flock`` on :data:`LOCK_PATH` before it creates
anything, and refuses to start while another holds it. The kernel drops the lock when
its holder exits, however it exits, so no stale lock outlives a crash; the descriptor is
not inherited by the lab's processes, so an orphaned daemon does not hold it either.

``--allow-concurrent`` runs anyway. Such a run takes the lock shared when it can (so that
a normal run started later still refuses), records in its environment what it found,
and every trial's outside-load probe records the CPU the other measurement used. It also
appends its own record to :func:`beside_path`, which every run reads when it ends
(:meth:`MeasurementLock.beside`): so the run that held the lock records in its own
environment which runs measured beside it, not only the run that came second.
"""

import fcntl
import json
import os
import secrets
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tunnelbench.errors import UserError
from tunnelbench.lab.state import process_start_time
from tunnelbench.model.lockrecord import LockMode, LockRecord, Measurer

LOCK_PATH = Path(os.environ.get("TUNNELBENCH_LOCK", "/run/tunnelbench/measurement.lock"))


@dataclass
class MeasurementLock:
    """The lock as this run holds it, and what it found when it took it."""

    mode: LockMode
    other: Measurer | None  # the exclusive holder this run found, when it found one
    _file: IO[str] | None = None
    path: Path | None = None
    me: "Claim | None" = None  # this run's record (with a token of its own)

    def beside(self) -> tuple[Measurer, ...]:
        """The concurrent runs that started while this one held the lock (their records
        in :func:`beside_path`), without this one."""
        if self.path is None or self.me is None:
            return ()
        return tuple(
            claim.measurer
            for claim in _read_beside(beside_path(self.path))
            if claim.token != self.me.token and claim.measurer.since >= self.me.measurer.since
        )

    def record(self) -> LockRecord:
        """What the run's environment stores about it."""
        return LockRecord(self.mode, self.other)

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the descriptor drops the flock
            self._file = None


def acquire(*, allow_concurrent: bool, path: Path | None = None) -> MeasurementLock:
    """Take the measurement lock, or raise :class:`UserError` naming who holds it.

    With ``allow_concurrent``, never refuses: takes the lock shared when no exclusive
    holder exists, else runs without it and says whom it runs beside.
    """
    path = path or LOCK_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    me = _me()
    try:
        if allow_concurrent:
            _append_beside(beside_path(path), me)
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                other = _holder(handle)
                handle.close()
                return MeasurementLock(LockMode.NONE, other, path=path, me=me)
            return MeasurementLock(LockMode.SHARED, None, handle, path=path, me=me)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(_refusal(_holder(handle), path)) from None
        handle.seek(0)
        handle.truncate()
        json.dump(me.measurer.to_json(), handle)
        handle.flush()
        _prune_beside(beside_path(path))
        return MeasurementLock(LockMode.EXCLUSIVE, None, handle, path=path, me=me)
    except BaseException:
        handle.close()
        raise


@dataclass(frozen=True)
class Claim:
    """A run's line in :func:`beside_path`: the run, and a token of its own by which it
    knows its line from another process's of the same PID."""

    measurer: Measurer
    token: str

    def to_json(self) -> dict[str, object]:
        return self.measurer.to_json() | {"token": self.token}


def _me() -> Claim:
    pid = os.getpid()
    measurer = Measurer(pid, process_start_time(pid), time.time(), shlex.join(sys.argv))
    return Claim(measurer, secrets.token_hex(8))


def beside_path(lock: Path) -> Path:
    """Where concurrent runs append their records: beside the lock file."""
    return lock.with_name(f"{lock.name}.beside")


def _append_beside(path: Path, claim: Claim) -> None:
    # One write of one line, O_APPEND: lines of runs starting together do not mix.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(claim.to_json()) + "\n").encode())
    finally:
        os.close(fd)


def _read_beside(path: Path) -> list[Claim]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    claims = []
    for line in lines:
        try:
            record = json.loads(line)
            claims.append(Claim(Measurer.from_json(record), str(record.get("token"))))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            continue  # a line cut short
    return claims


def _prune_beside(path: Path) -> None:
    """Keep only the records of runs still alive (taken with the lock exclusive)."""
    if not path.exists():
        return
    alive = [
        c for c in _read_beside(path)
        if process_start_time(c.measurer.pid) == c.measurer.start_time
    ]  # fmt: skip
    tmp = path.with_name(f"{path.name}.tmp")
    try:
        tmp.write_text("".join(json.dumps(c.to_json()) + "\n" for c in alive))
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _holder(handle: IO[str]) -> Measurer | None:
    """The exclusive holder's record, when it is readable and still its own."""
    handle.seek(0)
    try:
        holder = Measurer.from_json(json.loads(handle.read() or "null"))
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    if process_start_time(holder.pid) != holder.start_time:
        return None  # a shared holder runs; the record is an earlier run's
    return holder


def _refusal(holder: Measurer | None, path: Path) -> str:
    if holder is None:
        who = f"another tunnelbench measurement holds {path}"
    else:
        since = time.strftime("%H:%M:%S", time.localtime(holder.since))
        command = holder.command
        if len(command) > 80:
            command = command[:77] + "..."
        who = (
            "another tunnelbench measurement is running"
            f" (pid {holder.pid}, since {since}: {command})"
        )
    return (
        f"{who}; two measurements at once share this machine's CPU and both report false"
        " figures. Wait for it to end, or pass --allow-concurrent to run anyway (recorded"
        " with the run)"
    )
