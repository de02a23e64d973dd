"""One measurement at a time on this machine: a host-wide lock held while a run measures.

Two runs at once share the CPU and each stores figures 38-65% too low as if they were
true (no tunnel, 4 streams: 9,427 and 11,441 Mbit/s side by side against 26,653 alone).
A run therefore takes an exclusive ``flock`` on :data:`LOCK_PATH` before it creates
anything, and refuses to start while another holds it. The kernel drops the lock when
its holder exits, however it exits, so no stale lock outlives a crash; the descriptor is
not inherited by the lab's processes, so an orphaned daemon does not hold it either.

``--allow-concurrent`` runs anyway. Such a run takes the lock shared when it can (so that
a normal run started later still refuses), records in its environment what it found,
and every trial's outside-load probe records the CPU the other measurement used.
"""

import fcntl
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tunnelbench.errors import UserError
from tunnelbench.lab.state import process_start_time

LOCK_PATH = Path(os.environ.get("TUNNELBENCH_LOCK", "/run/tunnelbench/measurement.lock"))


@dataclass
class MeasurementLock:
    """The lock as this run holds it, and what it found when it took it."""

    mode: str  # "exclusive", "shared" (--allow-concurrent) or "none" (another run holds it)
    other: dict[str, Any] | None  # the exclusive holder this run found, when it found one
    _file: IO[str] | None = None

    def record(self) -> dict[str, Any]:
        """What the run's environment stores about it."""
        return {"mode": self.mode, "concurrent_with": self.other}

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
    try:
        if allow_concurrent:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                other = _holder(handle)
                handle.close()
                return MeasurementLock("none", other)
            return MeasurementLock("shared", None, handle)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(_refusal(_holder(handle), path)) from None
        handle.seek(0)
        handle.truncate()
        json.dump(_me(), handle)
        handle.flush()
        return MeasurementLock("exclusive", None, handle)
    except BaseException:
        handle.close()
        raise


def _me() -> dict[str, Any]:
    pid = os.getpid()
    return {
        "pid": pid,
        "start_time": process_start_time(pid),
        "since": time.time(),
        "command": shlex.join(sys.argv),
    }


def _holder(handle: IO[str]) -> dict[str, Any] | None:
    """The exclusive holder's record, when it is readable and still its own."""
    handle.seek(0)
    try:
        record: dict[str, Any] = json.loads(handle.read() or "null")
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict) or "pid" not in record:
        return None
    if process_start_time(int(record["pid"])) != record.get("start_time"):
        return None  # a shared holder runs; the record is an earlier run's
    return record


def _refusal(holder: dict[str, Any] | None, path: Path) -> str:
    if holder is None:
        who = f"another tunnelbench measurement holds {path}"
    else:
        since = time.strftime("%H:%M:%S", time.localtime(float(holder["since"])))
        command = str(holder["command"])
        if len(command) > 80:
            command = command[:77] + "..."
        who = (
            "another tunnelbench measurement is running"
            f" (pid {holder['pid']}, since {since}: {command})"
        )
    return (
        f"{who}; two measurements at once share this machine's CPU and both report false"
        " figures. Wait for it to end, or pass --allow-concurrent to run anyway (recorded"
        " with the run)"
    )
