"""How a run held the host-wide measurement lock, as its environment records it.

:mod:`tunnelbench.bench.measurement_lock` takes the lock; these are the records it
writes: each measuring process as the lock file and the file of concurrent runs name it
(:class:`Measurer`), and what a run's environment keeps under ``measurement_lock``
(:class:`LockRecord`). Their JSON is the shape every version stored: a record read
and written again is the JSON it was.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class LockMode(StrEnum):
    """How the run held the lock: alone; shared (``--allow-concurrent``, no exclusive
    holder); or not at all (``--allow-concurrent`` beside an exclusive holder)."""

    EXCLUSIVE = "exclusive"
    SHARED = "shared"
    NONE = "none"


@dataclass(frozen=True)
class Measurer:
    """A measuring process: its PID and start time (so that a later process of the same
    PID is not taken for it), since when it measures (epoch seconds) and its command."""

    pid: int
    start_time: int | None
    since: float
    command: str

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "start_time": self.start_time,
            "since": self.since,
            "command": self.command,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Measurer":
        """The record as stored (values kept as JSON held them: a float stays one);
        ``KeyError`` or ``TypeError`` where it is not such a record."""
        pid, since, command = data["pid"], data["since"], data["command"]
        if not isinstance(pid, int) or not isinstance(since, int | float):
            raise TypeError(f"not a measurer's record: {dict(data)!r}")
        return cls(pid, data.get("start_time"), since, str(command))


@dataclass(frozen=True)
class LockRecord:
    """What a run's environment stores of the lock: how the run held it, the exclusive
    holder it found (``concurrent_with``) and, once the run ends, the runs that measured
    beside it (``beside``; None: none recorded)."""

    mode: LockMode
    concurrent_with: Measurer | None = None
    beside: tuple[Measurer, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": self.mode.value,
            "concurrent_with": None
            if self.concurrent_with is None
            else self.concurrent_with.to_json(),
        }
        if self.beside is not None:
            out["beside"] = [m.to_json() for m in self.beside]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LockRecord":
        holder = data.get("concurrent_with")
        beside = data.get("beside")
        return cls(
            LockMode(data["mode"]),
            None if holder is None else Measurer.from_json(holder),
            None if beside is None else tuple(Measurer.from_json(m) for m in beside),
        )

    def with_beside(self, others: tuple[Measurer, ...]) -> "LockRecord":
        """This record with ``others`` added to ``beside``, each run once (by its PID and
        start of measuring)."""
        known = self.beside or ()
        seen = {(m.pid, m.since) for m in known}
        new = tuple(m for m in others if (m.pid, m.since) not in seen)
        return LockRecord(self.mode, self.concurrent_with, (*known, *new))
