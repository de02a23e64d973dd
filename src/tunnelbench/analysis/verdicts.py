"""What the diagnosis speaks of: a configuration as the rules see it (:class:`Subject`)
and what they conclude (:class:`Finding`, :class:`Diagnosis`), with the thresholds several
rules share.

The thresholds were chosen against this project's reference measurements: shaped links
reach 99.9% of the modelled ceiling, so 95% leaves room for TCP's ramp-up within short
trials without calling a genuinely slower result link-bound; a core or process counts as
saturated at 90% because a 10 Hz sampler over a few seconds reads a pegged core as
96-100% here (a single iperf3 sender: 99.0-99.7%; wireguard-go's busiest core: 96-98%).
Above 101% of the ceiling (plus what the shaper's bucket lets through in the window) the
number itself is suspect: that is a verdict of its own, ahead of all others.
"""

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from tunnelbench.model import metrics as metric
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.records import Resolved
from tunnelbench.model.wan import shaper_lead_bytes

LINK_BOUND_PCT = 95.0  # goodput at or above this share of the ceiling is the link's limit
ABOVE_CEILING_PCT = 101.0  # beyond this, the measurement itself is in doubt
SATURATED_PCT = 90.0  # a core this busy, or a process using this much of one core
#: BBR paces at this share of its estimate for one round trip in every eight (to drain
#: what its probing queued), and above it in the next to make up.
BBR_DRAIN_GAIN = 0.75


class Bound(StrEnum):
    ABOVE_CEILING = "above-ceiling"
    LINK = "link-bound"
    LINK_LOSSY = "link-bound-lossy"
    OUTSIDE_LOAD = "outside-load"
    STEAL = "steal"
    THERMAL = "thermal-limit"
    SINGLE_QUEUE = "single-queue"
    CPU = "cpu-bound"
    GENERATOR = "generator-bound"
    QUEUE_BELOW_BDP = "queue-below-bdp"
    QUEUE_DROPS = "queue-drop-bound"
    REORDERING = "reordering"
    LOSS = "loss-heavy"
    LATENCY = "latency-under-load"
    EMULATED = "emulated-cpu"
    TOO_FEW_RUNS = "too-few-runs"
    UNDETERMINED = "undetermined"


@dataclass(frozen=True)
class Evidence:
    """One number behind a finding: ``name`` says what was measured and where."""

    name: str
    value: float
    unit: str

    def text(self) -> str:
        if self.unit == "Mbit/s":
            return f"{self.name} {self.value:,.1f} Mbit/s"
        if self.unit == "%":
            return f"{self.name} {self.value:.1f}%"
        if self.unit == "ms":
            return f"{self.name} {self.value:.2f} ms"
        return f"{self.name} {self.value:,.0f}{' ' + self.unit if self.unit else ''}"


@dataclass(frozen=True)
class Finding:
    bound: Bound
    summary: str  # one sentence, numbers included
    evidence: tuple[Evidence, ...]
    subject: str | None = None  # what is at its limit: a core, a process, a device
    #: A limit the lab itself set (``offloads off``), when the finding is partly the
    #: lab's doing rather than the configuration's: its advice is the lab setting.
    lab_setting: str | None = None

    @property
    def label(self) -> str:
        """``cpu-bound``, or ``cpu-bound (offloads off: a lab setting)``."""
        if self.lab_setting is None:
            return self.bound.value
        return f"{self.bound.value} ({self.lab_setting}: a lab setting)"


@dataclass(frozen=True)
class Diagnosis:
    verdict: Finding
    others: tuple[Finding, ...] = ()

    @property
    def findings(self) -> tuple[Finding, ...]:
        return (self.verdict, *self.others)


@dataclass(frozen=True)
class Subject:
    """What the rules see of one configuration."""

    config: TrialConfig
    resolved: Resolved
    metrics: dict[str, float]  # medians over the successful trials
    ceiling_bps: float | None = None
    environment: Environment = field(default_factory=Environment)
    #: Every successful trial's own metrics, for what a median hides (spread, worst run).
    runs: tuple[dict[str, float], ...] = ()
    #: The processes outside the lab that used the most CPU in any run (name, % of a
    #: core), when the probes recorded them.
    outside_processes: tuple[tuple[str, float], ...] = ()
    #: This machine's noise: the CV (%) of the configuration's baseline in its run.
    noise_pct: float | None = None
    #: The configuration's runs that failed: the rules judge what is left, and say so.
    failed: int = 0

    @property
    def goodput_bps(self) -> float:
        return self.metrics.get(metric.GOODPUT.name, 0.0)

    @property
    def cores(self) -> list[int]:
        return metric.cores(n for n in self.metrics if n.endswith(".idle"))

    def busy(self, core: int) -> float:
        return 100.0 - self.metrics[metric.cpu(core, "idle")]

    def processes(self) -> dict[str, float]:
        """Process label -> % of one core, of the processes on the machine whose cores
        :attr:`cores` are: the lab's, or on real hosts the DUT's (``comm@gw``); the ends'
        generators there are read by their own rules (:func:`is_generator`)."""
        remote = self.resolved.remote
        owner = f"@{remote.dut}" if remote and remote.dut else ""
        return {
            label: value
            for n, value in sorted(self.metrics.items())
            if (label := metric.process_label(n)) is not None and label.endswith(owner)
        }

    def per_run(self, name: str) -> list[float]:
        """``name`` in each run that recorded it (the median alone without runs)."""
        values = [run[name] for run in self.runs if name in run]
        if not values and name in self.metrics:
            return [self.metrics[name]]
        return values


def medians(metric_sets: Iterable[dict[str, float]]) -> dict[str, float]:
    """Per metric name, the median over the trials that recorded it."""
    values: dict[str, list[float]] = {}
    for metrics in metric_sets:
        for name, value in metrics.items():
            values.setdefault(name, []).append(value)
    return {name: statistics.median(v) for name, v in values.items()}


def mbit(bps: float) -> float:
    return bps / 1e6


def is_generator(s: "Subject", label: str) -> bool:
    """Whether a process label is the load generator's, by the prefixes it declared."""
    generator = s.resolved.generator
    return generator is not None and label.startswith(generator.process_prefixes)


def share_of_ceiling(s: Subject) -> float | None:
    if s.ceiling_bps is None or s.ceiling_bps <= 0:
        return None
    return 100.0 * s.goodput_bps / s.ceiling_bps


def link_bound_pct(s: Subject) -> float:
    """The share of the ceiling a link-bound trial reaches: :data:`LINK_BOUND_PCT`, less,
    for BBR, what one drain round trip (:data:`BBR_DRAIN_GAIN` of the rate for one loaded
    round trip) takes of the measured window: a window shorter than BBR's 8-RTT cycle
    may hold that round trip without the one that makes up for it. Under TCG a 3 Mbit/s
    link's loaded RTT read 396 ms: over 2 s, 95 - 4.95 = 90.05% (a run read 94%)."""
    senders = s.resolved.traffic.congestion or s.config.traffic.congestion or ""
    rtt_ms = s.metrics.get(metric.RTT_LOADED.name)
    window = s.metrics.get(metric.GOODPUT_WINDOW.name) or s.config.traffic.duration
    if "bbr" not in senders.split(",") or not rtt_ms or window <= 0:
        return LINK_BOUND_PCT
    drain = 100.0 * (1 - BBR_DRAIN_GAIN)
    return LINK_BOUND_PCT - min(drain, drain * rtt_ms / 1000 / window)


def above_ceiling_pct(config: TrialConfig) -> float:
    """The share of the ceiling past which a goodput is more than the link can carry:
    :data:`ABOVE_CEILING_PCT`, plus what the lab's shaper can send ahead of its rate
    (:func:`~tunnelbench.model.wan.shaper_lead_bytes`) over the measured window: it may
    be ahead when the window opens. With tbf at 3 Mbit/s over 2 s that is 2.0% more (its
    bucket); with htb and offloads on, 10.8% (one 64 KiB aggregate more); at 1 Gbit/s over
    10 s, 0.01%."""
    wan, window = config.lab.wan, config.traffic.duration
    if wan.rate is None or window <= 0:
        return ABOVE_CEILING_PCT
    return ABOVE_CEILING_PCT + 100.0 * shaper_lead_bytes(wan) / (wan.rate / 8 * window)


def dut(s: Subject) -> str | None:
    """The DUT of a run on real hosts (whose cores ``cpu<N>.*`` are); None in a lab."""
    remote = s.resolved.remote
    return remote.dut if remote and remote.dut else None


def core_name(s: Subject, core: int) -> str:
    """``cpu1``, or on real hosts ``gw's cpu1``: which machine's core it is."""
    owner = dut(s)
    return f"{owner}'s cpu{core}" if owner else f"cpu{core}"
