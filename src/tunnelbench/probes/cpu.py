"""Per-core CPU accounting from ``/proc/stat``.

``/proc/stat`` counts, per core, the clock ticks spent in each state since boot. The share
of a state over a window is its tick delta divided by the sum of all deltas.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Column order of a "cpuN" line (proc(5)); guest time is already inside user/nice.
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CoreUsage:
    """Shares of one core over a window, in percent; they add up to 100."""

    core: int
    user: float
    system: float
    softirq: float
    irq: float
    idle: float
    steal: float

    @property
    def busy(self) -> float:
        return 100.0 - self.idle


Snapshot = dict[int, tuple[int, ...]]


def parse_proc_stat(text: str) -> Snapshot:
    """Per-core tick counters, keyed by core number (the aggregate "cpu" line is skipped)."""
    cores: Snapshot = {}
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *values = line.split()
            cores[int(name[3:])] = tuple(int(v) for v in values[: len(FIELDS)])
    return cores


def read_snapshot(path: Path = Path("/proc/stat")) -> Snapshot:
    return parse_proc_stat(path.read_text())


def usage(before: Snapshot, after: Snapshot) -> list[CoreUsage]:
    """Per-core usage between two snapshots; a core with no ticks counts as idle."""
    result = []
    for core in sorted(after):
        if core not in before:
            continue
        ticks = (a - b for a, b in zip(after[core], before[core], strict=True))
        delta = dict(zip(FIELDS, ticks, strict=False))
        total = sum(delta.values())
        if total <= 0:
            result.append(CoreUsage(core, 0.0, 0.0, 0.0, 0.0, 100.0, 0.0))
            continue

        def share(*names: str, d: dict[str, int] = delta, t: int = total) -> float:
            return 100.0 * sum(d.get(n, 0) for n in names) / t

        result.append(
            CoreUsage(
                core=core,
                user=share("user", "nice"),
                system=share("system"),
                softirq=share("softirq"),
                irq=share("irq"),
                idle=share("idle", "iowait"),
                steal=share("steal"),
            )
        )
    return result


def busiest(cores: list[CoreUsage]) -> CoreUsage | None:
    return max(cores, key=lambda c: c.busy, default=None)


def per_core(readings: Sequence[dict[int, float]]) -> dict[int, list[float]]:
    """Per core (in order), its values over the readings that have it: a per-core probe
    that could not read a core in one sample leaves it out of that sample only."""
    values: dict[int, list[float]] = {}
    for reading in readings:
        for core, value in reading.items():
            values.setdefault(core, []).append(value)
    return dict(sorted(values.items()))
