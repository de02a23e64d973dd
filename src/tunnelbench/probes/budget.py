"""The kernel's own account of each role's CPU budget (``lab.budget``), before and after
the traffic: how often the role's cgroup hit its quota.

The cgroup's ``cpu.stat`` counts the 100 ms periods in which the role had work
(``nr_periods``), those it ended throttled, its quota spent (``nr_throttled``), and the
time it waited throttled (``throttled_time`` in ns on cgroup v1, ``throttled_usec`` on
v2). Stored, over the whole traffic (warm-up included: the counters have no window):

- ``budget.<role>.throttled_pct``: throttled periods per period with work, in %;
- ``budget.<role>.throttled_s``: the time the role's processes waited for their quota.

A role held by its budget is throttled in most periods; a role within it, in none. This
is the second instrument beside the processes' CPU that the sampler measures.
"""

from collections.abc import Mapping
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.model import metrics as metric
from tunnelbench.probes.trial import Machines, ProbeContext, ProbeKind, ProbeReading, TrialProbe

Stat = dict[str, int]


def parse_stat(text: str) -> Stat:
    """``cpu.stat``'s "name value" lines."""
    stat: Stat = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            stat[name] = int(value)
    return stat


def throttled_seconds(stat: Stat) -> float:
    if "throttled_usec" in stat:  # cgroup v2
        return stat["throttled_usec"] / 1e6
    return stat.get("throttled_time", 0) / 1e9  # v1: nanoseconds


def budget_metrics(role: str, before: Stat, after: Stat) -> dict[str, float]:
    for name in ("nr_periods", "nr_throttled"):
        if name not in before or name not in after:
            raise LabError(f"lab.budget.{role}: the cgroup's cpu.stat has no {name}")
    periods = after["nr_periods"] - before["nr_periods"]
    throttled = after["nr_throttled"] - before["nr_throttled"]
    waited = throttled_seconds(after) - throttled_seconds(before)
    return {
        metric.budget(role, "throttled_pct"): round(100.0 * throttled / periods, 2)
        if periods
        else 0.0,
        metric.budget(role, "throttled_s"): round(waited, 4),
    }


class BudgetProbe(TrialProbe):
    kind = ProbeKind.BUDGET

    def __init__(self) -> None:
        self.machines: Machines | None = None
        self.cgroups: Mapping[str, Path] = {}
        self.before_stats: dict[str, Stat] = {}

    def _read(self) -> dict[str, Stat]:
        assert self.machines is not None
        machines = self.machines
        return {
            role: parse_stat(machines.host(role).read(path / "cpu.stat"))
            for role, path in self.cgroups.items()
        }

    def before(self, machines: Machines, context: ProbeContext) -> None:
        self.machines, self.cgroups = machines, context.cgroups
        self.before_stats = self._read()

    def after(self) -> ProbeReading:
        after = self._read()
        metrics: dict[str, float] = {}
        for role, stat in after.items():
            metrics |= budget_metrics(role, self.before_stats[role], stat)
        return ProbeReading(metrics, {"before": self.before_stats, "after": after})
