"""What held a configuration back: a verdict with the numbers that support it.

Each rule reads the medians of a configuration's successful trials (per-core CPU,
per-process CPU, qdisc and link counters, TCP counters, RTT under load) and the
theoretical ceiling, and either finds its situation, with evidence, or stays silent. The
rules are tried in the order of :data:`RULES`; the first that fires is the verdict and the
others are listed as further findings. When none fires the verdict is ``undetermined``
with what was seen: a rule that would need a guess stays silent instead.

The thresholds are named below. They were chosen against this project's reference
measurements: shaped links reach 99.9% of the modelled ceiling, so 95% leaves room for
TCP's ramp-up within short trials without calling a genuinely slower result link-bound;
a core or process counts as saturated at 90% because a 10 Hz sampler over a few seconds
reads a pegged core as 96-100% here (a single iperf3 sender: 99.0-99.7%; wireguard-go's
busiest core: 96-98%). Above 101% of the ceiling the number itself is suspect: that is a
verdict of its own, ahead of all others.

A median hides what varies between runs, so three rules also read every run
(:attr:`Subject.runs`): the link-bound verdict weighs the queue's drops, TCP's
retransmits and the spread of the runs (a run below 95% of the ceiling with loss in the
runs is ``link-bound-lossy``), and outside load and steal time are found by the worst
run. Busy cores are attributed: CPU time of processes outside the lab
(``load.outside_pct``) is not the configuration's limit, and a run recorded before that
metric says so.

Outside load and steal are about the machine, not the configuration: they outrank the
measured cause only where they could explain the shortfall from the ceiling (the typical
run's figures, :data:`DISTURBANCES`), and are told after it otherwise. In a guest whose
CPU QEMU emulates, a verdict about the CPU becomes ``emulated-cpu`` only where a core
was busy; otherwise the path's own finding stands. A CPU verdict of a trial whose lab
turned the offloads off is named as the lab's (:mod:`.lab_limits`).
"""

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from tunnelbench.analysis import drop_sites
from tunnelbench.analysis.lab_limits import lab_limit
from tunnelbench.analysis.queue_size import PACKET_FIFOS, wan_queue
from tunnelbench.kinds import Direction, Placement, Protocol, WanEncapsulation
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.records import TCG, Resolved
from tunnelbench.model.wan import format_pct
from tunnelbench.units import human_rate

LINK_BOUND_PCT = 95.0  # goodput at or above this share of the ceiling is the link's limit
ABOVE_CEILING_PCT = 101.0  # beyond this, the measurement itself is in doubt
SATURATED_PCT = 90.0  # a core this busy, or a process using this much of one core
BUDGET_USED = 0.9  # a process using this fraction of its CPU budget is held by it
QUEUE_DROP_SHARE_PCT = 0.1  # drops per packet offered to a qdisc or link
RETRANSMIT_HEAVY_PCT = 1.0  # retransmitted segments per segment sent
UDP_LOSS_PCT = 1.0
# The senders' reorder detections (TCPSACKReorder, TCPTSReorder, TCPRenoReorder) that
# make reordering a finding: the lab's FIFOs read 0 (with or without drops), and ESP that
# was called loss-heavy counted 260-347 a run with no packet dropped.
REORDER_EVENTS_MIN = 10
OUTSIDE_USER_PCT = 50.0  # runs without load.*: a saturated core mostly in user time...
OUTSIDE_LAB_PCT = 25.0  # ...while all lab processes together use less than this of a core
OUTSIDE_LOAD_PCT = 10.0  # outside processes using this much of one core are a finding
# The hypervisor running something else on a core for this share of the window: an idle
# guest here reads 0.0%, and a CPU-bound figure loses about as much as was stolen.
STEAL_PCT = 1.0
# Steal this large outranks the CPU verdicts: below it, the loss is within the 2-3% spread
# of a CPU-bound figure between runs here and cannot change which resource is the limit
# (CI saw 1.1% steal in one run of four outrank a saturated iperf3), so it is told after.
STEAL_VERDICT_PCT = 5.0
# A role's budget cgroup throttled in this share of the periods it had work is held by
# its budget (a role within its budget is throttled in none).
THROTTLED_PCT = 50.0
# A saturated core spending this much in softirq while another has room: receive work
# one queue put on one core. A PPPoE session on one of two emulated cores left the other
# 18-31% idle (tests/kernel), so room is counted from 15%.
SINGLE_QUEUE_SOFTIRQ_PCT = 50.0
SPARE_IDLE_PCT = 15.0
# Real hosts: a DUT zone this close to its lowest trip point is being (or about to be)
# throttled; a core whose clock fell this far below its top was slowed.
TRIP_MARGIN_C = 5.0
CLOCK_SHORT_PCT = 10.0
BLOAT_EXTRA_MS = 30.0  # RTT under load above idle RTT by at least this much...
BLOAT_FACTOR = 2.0  # ...and at least this many times the idle RTT


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
    environment: dict[str, Any] = field(default_factory=dict)
    #: Every successful trial's own metrics, for what a median hides (spread, worst run).
    runs: tuple[dict[str, float], ...] = ()
    #: The processes outside the lab that used the most CPU in any run (name, % of a
    #: core), when the probes recorded them.
    outside_processes: tuple[tuple[str, float], ...] = ()
    #: This machine's noise: the CV (%) of the configuration's baseline in its run.
    noise_pct: float | None = None

    def names(self, prefix: str, suffix: str = "") -> list[str]:
        return sorted(n for n in self.metrics if n.startswith(prefix) and n.endswith(suffix))

    @property
    def goodput_bps(self) -> float:
        return self.metrics.get("goodput_bps", 0.0)

    @property
    def cores(self) -> list[int]:
        return metric.cores(n for n in self.metrics if n.endswith(".idle"))

    def busy(self, core: int) -> float:
        return 100.0 - self.metrics[metric.cpu(core, "idle")]

    def processes(self) -> dict[str, float]:
        return {
            label: value
            for n, value in sorted(self.metrics.items())
            if (label := metric.process_label(n)) is not None
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


def _is_generator(s: "Subject", label: str) -> bool:
    """Whether a process label is the load generator's, by the prefixes it declared."""
    generator = s.resolved.generator
    return generator is not None and label.startswith(generator.process_prefixes)


def _share_of_ceiling(s: Subject) -> float | None:
    if s.ceiling_bps is None or s.ceiling_bps <= 0:
        return None
    return 100.0 * s.goodput_bps / s.ceiling_bps


def above_ceiling(s: Subject) -> Finding | None:
    """More than the link can carry: the shaper or the measurement is wrong, and every
    other conclusion about this configuration would rest on a false number."""
    pct = _share_of_ceiling(s)
    if pct is None or pct <= ABOVE_CEILING_PCT:
        return None
    return Finding(
        Bound.ABOVE_CEILING,
        f"{pct:.1f}% of the link's ceiling ({mbit(s.goodput_bps):,.1f} of"
        f" {mbit(s.ceiling_bps or 0):,.1f} Mbit/s): more than the link can carry, so the"
        " shaping or the measurement is in doubt",
        (
            Evidence("goodput", mbit(s.goodput_bps), "Mbit/s"),
            Evidence("ceiling", mbit(s.ceiling_bps or 0), "Mbit/s"),
            Evidence("share of ceiling", pct, "%"),
        ),
        subject="measurement",
    )


def retransmit_source(s: Subject) -> tuple[str, str] | None:
    """The per-run retransmit metric and how to name its source: the kernel's count over
    the measured window (``tcp.window.retrans_segs``), else the generator's own count
    (runs recorded before the window counters); None when neither was recorded."""
    if "tcp.window.retrans_segs" in s.metrics:
        return "tcp.window.retrans_segs", "the kernel's count"
    if "retransmits" in s.metrics:
        return "retransmits", f"{s.config.traffic.generator.value}'s count"
    return None


def _drops(metrics: dict[str, float]) -> float | None:
    """Packets dropped in one run by every qdisc and interface the probes read; None when
    none was read."""
    names = [
        n
        for n in metrics
        if (n.startswith("qdisc.") and n.endswith(".drops"))
        or (n.startswith("link.") and n.endswith("_dropped"))
    ]
    return sum(metrics[n] for n in names) if names else None


def _per_run(values: list[float]) -> str:
    """``87``, or ``87 (4-177)``: the median, and the range when the runs differ."""
    median = f"{statistics.median(values):,.0f}"
    if min(values) == max(values):
        return median
    return f"{median} ({min(values):,.0f}-{max(values):,.0f})"


def link_bound(s: Subject) -> Finding | None:
    """At the shaped link's limit, weighing what the median hides: the queue's drops,
    TCP's retransmits and the spread of the runs. When the slowest run fell below
    :data:`LINK_BOUND_PCT` of the ceiling while packets were lost, or the senders
    retransmitted :data:`RETRANSMIT_HEAVY_PCT` of their segments, the verdict is
    ``link-bound-lossy``: the link is the limit, but the queue costs throughput."""
    pct = _share_of_ceiling(s)
    if pct is None or not LINK_BOUND_PCT <= pct <= ABOVE_CEILING_PCT:
        return None
    ceiling = s.ceiling_bps or 0.0
    evidence = [
        Evidence("goodput", mbit(s.goodput_bps), "Mbit/s"),
        Evidence("ceiling", mbit(ceiling), "Mbit/s"),
        Evidence("share of ceiling", pct, "%"),
    ]
    clauses = []
    lost = False
    drops = [d for d in (_drops(run) for run in s.runs or (s.metrics,)) if d is not None]
    if drops:
        median_drops = statistics.median(drops)
        evidence.append(Evidence("queue and interface drops per run", median_drops, "packets"))
        lost = lost or max(drops) > 0
        if max(drops) > 0:
            clauses.append(f"the queues dropped {_per_run(drops)} packets per run")
    source = retransmit_source(s)
    retrans_share = None
    if source is not None:
        name, said = source
        retrans = s.per_run(name)
        median_retrans = statistics.median(retrans)
        evidence.append(Evidence(f"TCP retransmits per run ({said})", median_retrans, ""))
        lost = lost or max(retrans) > 0
        if max(retrans) > 0:
            clauses.append(f"TCP retransmitted {_per_run(retrans)} segments per run ({said})")
        retrans_share = _retransmit_share(s)
        if retrans_share is not None:
            evidence.append(Evidence("retransmit share", retrans_share[0], "%"))
    shares = [100.0 * g / ceiling for g in s.per_run("goodput_bps")] if ceiling > 0 else []
    if len(shares) > 1:
        evidence += [
            Evidence("slowest run, share of ceiling", min(shares), "%"),
            Evidence("fastest run, share of ceiling", max(shares), "%"),
        ]
        clauses.append(f"runs span {min(shares):.1f}-{max(shares):.1f}% of the ceiling")
    slow_run = bool(shares) and min(shares) < LINK_BOUND_PCT
    # Segments retransmitted because they arrived late are no loss the queue caused.
    late = _reordered(s)
    if late is not None:
        clauses.append(f"TCP counted {late.events:,.0f} reorder events with no packet lost")
    heavy = retrans_share is not None and retrans_share[0] >= RETRANSMIT_HEAVY_PCT and late is None
    head = (
        f"at {pct:.1f}% of the link's ceiling ({mbit(s.goodput_bps):,.1f} of"
        f" {mbit(ceiling):,.1f} Mbit/s)"
    )
    if (lost and slow_run) or heavy:
        cost = []
        if slow_run:
            cost.append(f"the slowest run reached only {min(shares):.1f}%")
        if heavy and retrans_share is not None:
            cost.append(f"{retrans_share[0]:.2f}% of the segments sent were retransmitted")
        return Finding(
            Bound.LINK_LOSSY,
            f"{head}: the shaped link is the limit, but loss costs throughput:"
            f" {' and '.join(cost)}; {'; '.join(clauses)}",
            tuple(evidence),
            subject="WAN link",
        )
    tail = f"; {'; '.join(clauses)}" if clauses else ""
    return Finding(
        Bound.LINK,
        f"{head}: the shaped link is the limit{tail}",
        tuple(evidence),
        subject="WAN link",
    )


def cpu_budget_bound(s: Subject) -> Finding | None:
    budget = s.config.tunnel.cpu_budget
    if budget is None:
        return None
    limit = 100.0 * budget
    held = {
        label: pct
        for label, pct in s.processes().items()
        if not _is_generator(s, label) and pct >= BUDGET_USED * limit
    }
    if not held:
        return None
    label, pct = max(held.items(), key=lambda item: item[1])
    return Finding(
        Bound.CPU,
        f"{label} used {pct:.1f}% of one core against its CPU budget of {limit:.0f}%:"
        " the budget is the limit",
        (Evidence(f"{label} CPU", pct, "%"), Evidence("tunnel.cpu_budget", limit, "%")),
        subject=label,
    )


def role_budget_bound(s: Subject) -> Finding | None:
    """A role held by its ``lab.budget``, by the kernel's own count: its cgroup ended
    most of the periods it had work throttled, its quota spent."""
    held = [
        (pct, role, budget)
        for role, budget in s.config.lab.budget.given().items()
        if (pct := s.metrics.get(metric.budget(role, "throttled_pct"))) is not None
        and pct >= THROTTLED_PCT
    ]
    if not held:
        return None
    pct, role, budget = max(held)
    limit = 100.0 * budget
    return Finding(
        Bound.CPU,
        f"the {role}'s processes hit its CPU budget of {limit:.0f}% of a core in {pct:.0f}%"
        " of the 100 ms periods they had work (the cgroup's own count): the budget is the"
        " limit",
        (
            Evidence(f"{role} budget periods throttled", pct, "%"),
            Evidence(f"lab.budget.{role}", limit, "%"),
        ),
        subject=role,
    )


def dut(s: Subject) -> str | None:
    """The DUT of a run on real hosts (whose cores ``cpu<N>.*`` are); None in a lab."""
    remote = s.resolved.remote
    return str(remote["dut"]) if remote and remote.get("dut") else None


def core_name(s: Subject, core: int) -> str:
    """``cpu1``, or on real hosts ``gw's cpu1``: which machine's core it is."""
    owner = dut(s)
    return f"{owner}'s cpu{core}" if owner else f"cpu{core}"


def clock_short(s: Subject, core: int) -> tuple[float, float, float] | None:
    """(mean MHz, lowest MHz, top MHz) of a real DUT's core whose clock ran at least
    :data:`CLOCK_SHORT_PCT` below its top over the window; None otherwise."""
    remote = s.resolved.remote or {}
    top = (remote.get("max_mhz") or {}).get(str(core))
    mean, low = s.metrics.get(metric.cpu(core, "mhz")), s.metrics.get(metric.cpu(core, "mhz_min"))
    if not top or mean is None or low is None:
        return None
    if mean > top * (1 - CLOCK_SHORT_PCT / 100):
        return None
    return mean, low, float(top)


def thermal_limit(s: Subject) -> Finding | None:
    """A real DUT near its thermal trip point during the traffic: its clock is being
    lowered (or about to be) to cool it, whatever else is saturated."""
    owner = dut(s)
    if owner is None:
        return None
    trips = (s.resolved.remote or {}).get("trips_c") or {}
    hot = []
    for zone, trip in sorted(trips.items()):
        reached = s.metrics.get(f"thermal.{owner}.{zone}.max_c")
        if reached is not None and reached >= float(trip) - TRIP_MARGIN_C:
            hot.append((zone, reached, float(trip)))
    if not hot:
        return None
    zone, reached, trip = max(hot, key=lambda h: h[1] - h[2])
    evidence = [
        Evidence(f"{owner} {zone} max", reached, "°C"),
        Evidence(f"{zone} trip point", trip, "°C"),
    ]
    slowed = ""
    for core in s.cores:
        if (short := clock_short(s, core)) is not None:
            mean, low, top = short
            evidence.append(Evidence(f"cpu{core} clock", mean, "MHz"))
            slowed = (
                f"; {core_name(s, core)} ran at {mean:,.0f} of {top:,.0f} MHz (down to {low:,.0f})"
            )
            break
    return Finding(
        Bound.THERMAL,
        f"{owner} ran hot: {zone} reached {reached:.0f} °C against a trip point of"
        f" {trip:.0f} °C{slowed}",
        tuple(evidence),
        subject=zone,
    )


def single_queue(s: Subject) -> Finding | None:
    """One queue served by one core: a saturated core busy mostly in softirq (receive
    and forwarding work) while another core has room, on links of one queue and no
    steering. Only where the lab's own work fills the core (:func:`cpu_bound` agrees), and
    not where the plan held roles to cores (``lab.cpus``, pinned placement): a core full
    of the roles put on it is that choice, not the queue's."""
    lab = s.config.lab
    # A NIC's RSS cannot hash inside PPPoE: the session is one queue, whatever the rest.
    session = lab.wan.encapsulation is WanEncapsulation.PPPOE
    queues = 1 if session else (lab.queues or 1)
    owner = dut(s)
    if (queues > 1 and owner is None) or lab.rps_cpus is not None or len(s.cores) < 2:
        return None
    if lab.placement is Placement.PINNED or lab.cpus.given():
        return None
    if cpu_bound(s) is None:
        return None
    hot = max(s.cores, key=s.busy)
    softirq = s.metrics.get(metric.cpu(hot, "softirq"), 0.0)
    spare = max(
        (c for c in s.cores if c != hot), key=lambda c: s.metrics.get(metric.cpu(c, "idle"), 0.0)
    )
    idle = s.metrics.get(metric.cpu(spare, "idle"), 0.0)
    if softirq < SINGLE_QUEUE_SOFTIRQ_PCT or idle < SPARE_IDLE_PCT:
        return None
    if owner is not None:
        why = f"{owner}'s NIC queues (RSS) or RPS put this traffic's receive work on one core"
    elif session:
        why = "the WAN's PPPoE session is one queue (a NIC's RSS cannot hash inside it)"
    else:
        why = f"the links have {queues} queue"
    return Finding(
        Bound.SINGLE_QUEUE,
        f"one queue, one core: {core_name(s, hot)} is {s.busy(hot):.0f}% busy, {softirq:.0f}%"
        f" of it in softirq (receive and forwarding), while cpu{spare} is {idle:.0f}% idle;"
        f" {why}, so one core serves it",
        (
            Evidence(f"cpu{hot} busy", s.busy(hot), "%"),
            Evidence(f"cpu{hot} softirq", softirq, "%"),
            Evidence(f"cpu{spare} idle", idle, "%"),
            *(() if owner else (Evidence("queues per link", queues, ""),)),
        ),
        subject=f"cpu{hot}",
    )


def threaded_generator(s: "Subject") -> bool:
    """Whether the generator runs each stream in a thread of its own (iperf2), so that
    one process can use up to one core per stream, as the generator declared."""
    return s.resolved.generator is not None and s.resolved.generator.threaded_streams


def generator_cores(s: Subject) -> int:
    """How many cores one generator process can keep busy: one, or for a threaded
    generator one per stream it runs, up to the cores there are."""
    if not threaded_generator(s) or not s.resolved.single_process:
        return 1
    return max(1, min(s.config.traffic.streams, len(s.cores) or 1))


def busiest_generator(s: Subject) -> tuple[str, float, int, int] | None:
    """The generator's busiest process: per run, the generator process that used the most
    CPU, and the median of those shares over the runs; returned with the label busiest in
    most runs, and in how many of how many runs it was. None without generator figures.

    Per run, because which end is the limit can change from run to run: with one iperf3
    process per side, the sender was at 100% in some runs of one configuration and the
    receiver at 99% in the others, and the median of each side on its own (21% and 99%,
    or 50% and 64%) could miss a configuration its generator held back in every run."""
    busiest = []
    for run in s.runs or (s.metrics,):
        shares = {
            label: value
            for name, value in run.items()
            if (label := metric.process_label(name)) is not None and _is_generator(s, label)
        }
        if shares:
            busiest.append(max(shares.items(), key=lambda item: item[1]))
    if not busiest:
        return None
    labels = [label for label, _ in busiest]
    label = max(sorted(set(labels)), key=labels.count)
    pct = statistics.median(pct for _, pct in busiest)
    return label, pct, labels.count(label), len(busiest)


def generator_bound(s: Subject) -> Finding | None:
    cores = generator_cores(s)
    found = busiest_generator(s)
    if found is None or found[1] < SATURATED_PCT * cores:
        return None
    label, pct, times, runs = found
    per_process = s.config.traffic.streams if s.resolved.single_process else 1
    used = (
        f"{pct:.1f}% of one core"
        if cores == 1
        else f"{pct:.1f}% of a core, {pct / cores:.0f}% of each of the {cores} cores its"
        " threads can use"
    )
    who = f"the load generator {label}"
    if times < runs:
        who = (
            f"the load generator's busiest process ({label} in {times} of {runs} runs,"
            " another in the rest)"
        )
    return Finding(
        Bound.GENERATOR,
        f"{who} used {used}"
        f" ({per_process} stream{'s' if per_process > 1 else ''} in that process): the"
        " generator is the limit",
        (
            Evidence(
                f"{label} CPU" if times == runs else "busiest generator process CPU", pct, "%"
            ),
            Evidence("streams per generator process", per_process, ""),
        ),
        subject=label,
    )


def _lab_share(s: Subject) -> tuple[float, float, float] | None:
    """Busy time over all cores split by who used it, in % of one core: (everything but
    outside processes, the lab's processes, outside processes); None for runs recorded
    before the load probes. What is not outside (the lab's processes, softirq, irq and
    kernel threads such as the kernel's crypto workers) is the lab's work."""
    outside = s.metrics.get("load.outside_pct")
    if outside is None:
        return None
    busy = sum(s.busy(c) for c in s.cores)
    return max(0.0, busy - outside), s.metrics.get("load.lab_pct", 0.0), outside


def cpu_bound(s: Subject) -> Finding | None:
    """A saturated core, when the lab's own work accounts for it.

    With the load probes (``load.outside_pct``), the busy time of all cores minus what
    processes outside the lab used is the lab's work; the configuration is CPU-bound only
    when that fills at least one saturated core's worth (:data:`SATURATED_PCT`), and "all
    N cores" only when it fills all of them. Runs recorded before the probes keep the
    older test (a core mostly in user time while the lab's processes use little is
    someone else's) and say that the attribution was not recorded.
    """
    cores = s.cores
    saturated = [c for c in cores if s.busy(c) >= SATURATED_PCT]
    if not saturated:
        return None
    core = max(saturated, key=s.busy)
    split = {p: s.metrics.get(metric.cpu(core, p), 0.0) for p in ("user", "system", "softirq")}
    lab_share = sum(s.processes().values())
    attribution = _lab_share(s)
    filled = len(saturated)
    if attribution is None:
        if split["user"] >= OUTSIDE_USER_PCT and lab_share < OUTSIDE_LAB_PCT:
            # The core counts the whole host: user time no lab process accounts for is
            # someone else's load, not this configuration's limit.
            return None
    else:
        lab_work = attribution[0]
        filled = min(len(saturated), int(lab_work // SATURATED_PCT))
        if filled == 0:
            return None  # the saturation is outside processes' work
    evidence = [
        Evidence(f"cpu{core} busy", s.busy(core), "%"),
        *(Evidence(f"cpu{core} {p}", v, "%") for p, v in split.items()),
    ]
    where = f"{core_name(s, core)} at {s.busy(core):.0f}%"
    if (short := clock_short(s, core)) is not None:
        where += f" with its clock at {short[0]:,.0f} of {short[2]:,.0f} MHz"
        evidence.append(Evidence(f"cpu{core} clock", short[0], "MHz"))
    if filled == len(saturated) == len(cores) > 1:
        where = f"all {len(cores)} cores at {SATURATED_PCT:.0f}% or more (busiest: {where})"
    hot = {label: pct for label, pct in s.processes().items() if not _is_generator(s, label)}
    if hot:
        label, pct = max(hot.items(), key=lambda item: item[1])
        evidence.append(Evidence(f"{label} CPU", pct, "%"))
        who = f"; {label} used {pct:.0f}% of a core"
        subject = label
    else:
        kernel = split["system"] + split["softirq"]
        who = f"; the kernel's share (system + softirq) is {kernel:.0f}%"
        subject = f"cpu{core}"
    if attribution is None:
        if dut(s) is None:  # a real DUT's load is all the DUT's own
            who += "; outside load not recorded in this run"
    else:
        lab_work, lab_procs, outside = attribution
        softirq = sum(s.metrics.get(metric.cpu(c, "softirq"), 0.0) for c in cores)
        evidence += [
            Evidence("lab's work (all cores)", lab_work, "%"),
            Evidence("lab processes CPU", lab_procs, "%"),
            Evidence("softirq (all cores)", softirq, "%"),
            Evidence("outside processes CPU", outside, "%"),
        ]
        if outside >= OUTSIDE_LOAD_PCT:
            who += (
                f"; the lab's work is {lab_work:.0f}% of a core (its processes"
                f" {lab_procs:.0f}%, softirq {softirq:.0f}%), outside processes {outside:.0f}%"
            )
    return Finding(
        Bound.CPU,
        f"{where} (user {split['user']:.0f}%, system {split['system']:.0f}%,"
        f" softirq {split['softirq']:.0f}%){who}",
        tuple(evidence),
        subject=subject,
    )


def outside_load(s: Subject) -> Finding | None:
    """Processes outside the lab used the CPU during a measured window: judged by the
    worst run, since one disturbed run is enough to move a median of three. With a
    saturated core the figure is not trustworthy (the lab competed for the CPU); without
    one it probably cost little, and the finding says which."""
    outside = s.per_run("load.outside_pct")
    if not outside or max(outside) < OUTSIDE_LOAD_PCT:
        return None
    worst = max(outside)
    disturbed = sum(1 for v in outside if v >= OUTSIDE_LOAD_PCT)
    runs = f" in {disturbed} of {len(outside)} runs" if len(outside) > 1 else ""
    named = ", ".join(f"{name} {pct:.0f}%" for name, pct in s.outside_processes[:3])
    who = f" ({named})" if named else ""
    saturated = any(s.busy(c) >= SATURATED_PCT for c in s.cores)
    lab = s.metrics.get("load.lab_pct")
    lab_text = f"; the lab's processes used {lab:.0f}%" if lab is not None else ""
    judgement = (
        "a core was saturated, so this figure is not trustworthy: measure on a quiet machine"
        if saturated
        else "no core was saturated, so it probably cost little"
    )
    return Finding(
        Bound.OUTSIDE_LOAD,
        f"outside load: processes outside the lab used up to {worst:.0f}% of a core{runs}"
        f" during the measured window{who}{lab_text}; {judgement}",
        (
            Evidence("outside processes CPU, worst run", worst, "%"),
            Evidence("runs with outside load", disturbed, ""),
        ),
        subject="outside processes",
    )


def worst_steal(metrics: dict[str, float]) -> tuple[int, float] | None:
    """The core the hypervisor took the most time from in one trial, and that share (%);
    None for a trial recorded before steal was."""
    found = [
        (parsed[0], value)
        for name, value in metrics.items()
        if (parsed := metric.parse_cpu(name)) is not None and parsed[1] == "steal"
    ]
    return max(found, key=lambda item: item[1]) if found else None


def _steal(s: Subject, floor: float) -> Finding | None:
    runs = [found for run in (s.runs or (s.metrics,)) if (found := worst_steal(run))]
    if not runs or max(pct for _, pct in runs) < floor:
        return None
    core, worst = max(runs, key=lambda item: item[1])
    disturbed = sum(1 for _, pct in runs if pct >= STEAL_PCT)
    where = f" in {disturbed} of {len(runs)} runs" if len(runs) > 1 else ""
    return Finding(
        Bound.STEAL,
        f"steal time: the hypervisor took up to {worst:.1f}% of cpu{core}{where} during the"
        " measured window; a CPU-bound figure is low by about as much, so measure on a"
        " host with dedicated cores or compare only runs without steal",
        (
            Evidence(f"cpu{core} steal, worst run", worst, "%"),
            Evidence("runs with steal", disturbed, ""),
        ),
        subject=f"cpu{core}",
    )


def heavy_steal(s: Subject) -> Finding | None:
    """The hypervisor gave this VM's cores to something else for long enough to change
    which resource looks like the limit: judged before the CPU verdicts, by the worst run,
    as outside load is."""
    return _steal(s, STEAL_VERDICT_PCT)


def steal(s: Subject) -> Finding | None:
    """Steal in a measured window, from :data:`STEAL_PCT` of a core in the worst run:
    the verdict only where it could explain the shortfall (:func:`steal_explains`), else
    a finding told after the measured ones."""
    return _steal(s, STEAL_PCT)


def typical_steal(s: Subject) -> float | None:
    """The steal of the busiest core in the typical run: per run, the steal of that run's
    busiest core (its most stolen one when idle was not recorded), and the median over the
    runs; None for runs recorded before steal was."""
    values = []
    for run in s.runs or (s.metrics,):
        cores = metric.cores(n for n in run if n.endswith(".idle"))
        if cores:
            busiest = min(cores, key=lambda c: run[metric.cpu(c, "idle")])
            value = run.get(metric.cpu(busiest, "steal"))
        else:
            value = found[1] if (found := worst_steal(run)) is not None else None
        if value is not None:
            values.append(value)
    return statistics.median(values) if values else None


def steal_explains(s: Subject) -> bool:
    """Whether the steal could explain what the configuration fell short by. A CPU-bound
    figure loses about as much as was stolen from its busiest core: given that time back
    the typical run would have to reach the link's limit (:data:`LINK_BOUND_PCT` of the
    ceiling). Without a ceiling there is no shortfall to compare, and steal of
    :data:`STEAL_VERDICT_PCT` in the typical run is enough to doubt the figure. A blip in
    one run of five (1.1%) explains neither: the typical run had none."""
    typical = typical_steal(s)
    if typical is None or typical < STEAL_PCT:
        return False
    pct = _share_of_ceiling(s)
    if pct is None:
        return typical >= STEAL_VERDICT_PCT
    return typical >= 100.0 or pct * 100.0 / (100.0 - typical) >= LINK_BOUND_PCT


def outside_explains(s: Subject) -> bool:
    """Whether outside processes could explain what the configuration fell short by. They
    cost the lab nothing while a core had room (no core saturated). With a saturated core
    and a ceiling, the lab's work given the outside processes' CPU as well (the typical
    run's) would have to reach the link's limit; without a ceiling, a saturated core
    shared with them makes the figure untrustworthy."""
    if not any(s.busy(c) >= SATURATED_PCT for c in s.cores):
        return False
    pct = _share_of_ceiling(s)
    attribution = _lab_share(s)
    if pct is None or attribution is None:
        return True
    lab_work = attribution[0]
    outside = statistics.median(s.per_run("load.outside_pct"))
    return lab_work <= 0 or pct * (lab_work + outside) / lab_work >= LINK_BOUND_PCT


#: Findings about the machine rather than the configuration, with what decides whether
#: they could explain its figure: only then do they outrank the measured cause.
DISTURBANCES: dict[Bound, Callable[[Subject], bool]] = {
    Bound.OUTSIDE_LOAD: outside_explains,
    Bound.STEAL: steal_explains,
}


#: Drop-tail queues, whose limit is all the buffer a flow gets (fair and delay-managing
#: queues keep their own much shorter standing queue, so a larger limit does not help).
DROP_TAIL = PACKET_FIFOS


def queue_below_bdp(s: Subject) -> Finding | None:
    """One TCP flow needs the bottleneck to buffer a bandwidth-delay product: a
    loss-based sender shrinks its window at a drop (Reno to half, cubic to 0.7), and the
    queue must keep the link busy while the window grows back. With less, the link idles
    after every drop.

    Judged only where the configuration sets the delay (``lab.wan.delay``; unimpaired,
    the lab's round trip is a fraction of a millisecond and the product a few packets),
    on a shaped link with a drop-tail queue, for one TCP stream, and only when the
    trial's own figures show the shortfall: goodput below :data:`LINK_BOUND_PCT` of the
    ceiling while the WAN queue dropped packets. The round trip is the idle one measured
    (it includes the delay both ways), or twice the delay when it was not recorded. The
    queue holds its limit in packets of the size its device was handed in the trial
    (GSO/GRO aggregates where the lab keeps offloads on), or full frames where the size
    was not recorded (:mod:`tunnelbench.analysis.queue_size`).
    """
    wan, traffic = s.config.lab.wan, s.config.traffic
    queue = wan_queue(s.config, s.metrics)
    if not wan.delay or wan.rate is None or queue is None:
        return None
    if traffic.protocol is not Protocol.TCP or traffic.streams != 1:
        return None
    pct = _share_of_ceiling(s)
    drops = sum(s.metrics[n] for n in s.names("qdisc.", ".wan.drops"))
    if pct is None or pct >= LINK_BOUND_PCT or drops <= 0:
        return None
    held, bdp = queue.held_bytes, queue.bdp
    if held >= bdp:
        return None
    packets = (
        f"{wan.queue_limit:,} packets"
        if queue.measured is None or queue.measured <= queue.frame
        else f"{wan.queue_limit:,} packets of {queue.packet_bytes:,.0f} bytes, measured,"
    )
    return Finding(
        Bound.QUEUE_BELOW_BDP,
        f"the bottleneck queue ({packets} = {held / 1000:,.1f} kB) holds"
        f" less than one bandwidth-delay product ({bdp / 1000:,.1f} kB at"
        f" {human_rate(wan.rate)} and RTT {queue.rtt_s * 1000:,.1f} ms); one TCP flow"
        f" cannot keep the link full: {pct:.1f}% of the ceiling, and the WAN queue dropped"
        f" {drops:,.0f} packets",
        (
            Evidence("queue", held, "bytes"),
            Evidence("bandwidth-delay product", bdp, "bytes"),
            Evidence("round trip", queue.rtt_s * 1000, "ms"),
            Evidence("share of ceiling", pct, "%"),
            Evidence("WAN queue drops", drops, "packets"),
            Evidence("full-sized frame", queue.frame, "bytes"),
            Evidence(*queue.evidence()[1]),
        ),
        subject="WAN queue",
    )


def queue_drops(s: Subject) -> Finding | None:
    """The place that dropped the largest share of what it was offered, when that is at
    least :data:`QUEUE_DROP_SHARE_PCT`: the WAN queue under test, the tunnel device's own
    queue (a userspace daemon that does not read its TUN device as fast as the kernel
    fills it), or another device (:mod:`tunnelbench.analysis.drop_sites`)."""
    worst = max(
        (site for site in drop_sites.sites(s.metrics) if site.drops > 0),
        key=lambda site: site.share_pct,
        default=None,
    )
    if worst is None or worst.share_pct < QUEUE_DROP_SHARE_PCT:
        return None
    share, drops = worst.share_pct, worst.drops
    evidence = [
        Evidence(f"drops at {worst.name}", drops, "packets"),
        Evidence("drop share", share, "%"),
    ]
    head = f"the {worst.name} dropped {drops:,.0f} packets ({share:.2f}% of those offered)"
    if worst.where == "tunnel":
        wan = drop_sites.dropped(s.metrics, "wan")
        reader = ""
        if s.resolved.tunnel is not None and s.resolved.tunnel.userspace:
            reader = f": {s.resolved.tunnel_implementation}, which reads it, did not keep up"
        head = (
            f"the tunnel device's own queue ({worst.name}) dropped {drops:,.0f} packets"
            f" ({share:.2f}% of those offered){reader}"
        )
        if wan is not None:
            evidence.append(Evidence("WAN queue drops", wan, "packets"))
            head += f"; the WAN dropped {wan:,.0f}"
    source = retransmit_source(s)
    tail = ""
    if source is not None:
        retransmits = s.metrics[source[0]]
        evidence.append(Evidence(f"TCP retransmits ({source[1]})", retransmits, ""))
        tail = f", and TCP retransmitted {retransmits:,.0f} segments ({source[1]})"
    return Finding(Bound.QUEUE_DROPS, f"{head}{tail}", tuple(evidence), subject=worst.name)


def _senders(s: Subject) -> list[str]:
    chain_ends = ("client", "server")
    if s.config.traffic.direction is Direction.UPLOAD:
        return [chain_ends[0]]
    if s.config.traffic.direction is Direction.DOWNLOAD:
        return [chain_ends[1]]
    return list(chain_ends)


def _retransmit_share(s: Subject) -> tuple[float, float, float] | None:
    """(share %, retransmitted, sent) of the senders' segments: over the measured window
    when the window counters were recorded, else over the whole trial; None without the
    senders' own counters (a share would be a guess)."""
    senders = _senders(s)
    for prefix in ("tcp.window.", "tcp."):
        retrans = [s.metrics.get(f"{prefix}{r}.retrans_segs") for r in senders]
        sent = [s.metrics.get(f"{prefix}{r}.out_segs") for r in senders]
        if any(v is None for v in retrans + sent):
            continue
        total_sent = sum(v for v in sent if v is not None)
        total_retrans = sum(v for v in retrans if v is not None)
        if total_sent > 0:
            return 100.0 * total_retrans / total_sent, total_retrans, total_sent
    return None


@dataclass(frozen=True)
class Reordered:
    """TCP's retransmits that the path's drops do not account for, with the senders'
    own count of packets that arrived out of order."""

    events: float  # the senders' reorder detections
    share: float  # % of their segments retransmitted
    retransmitted: float
    sent: float
    lost: float  # packets every recorded counter dropped, netem's emulated loss included
    lost_again: float  # retransmissions TCP found lost in turn (TCPLostRetransmit)


def _senders_count(s: Subject, name: str) -> float | None:
    """The senders' TCP counter ``name`` (``tcp[.window].<role>.<name>``): over the
    measured window when recorded, else over the whole trial; None without it."""
    senders = _senders(s)
    for prefix in ("tcp.window.", "tcp."):
        values = [s.metrics.get(f"{prefix}{role}.{name}") for role in senders]
        if all(v is not None for v in values):
            return sum(v for v in values if v is not None)
    return None


def _reordered(s: Subject) -> Reordered | None:
    """Heavy retransmits that are reordering, not loss. The senders counted at least
    :data:`REORDER_EVENTS_MIN` reorder events and retransmitted at least
    :data:`RETRANSMIT_HEAVY_PCT` of their segments, and neither sign of real loss
    accounts for them: everything the probes count as dropped (queues, interfaces,
    netem's emulated loss) is less than half the retransmits, and TCP found few of its
    retransmissions lost in turn. A path that loses a share p of its packets loses about
    p of the retransmissions too (boringtun here: 22% retransmitted, 21% of those lost
    again, with no counter dropping anything: loss where no probe looks, such as a
    socket's buffer); a late segment's retransmission is not lost, so reordering alone
    leaves that count near 0. Fewer than half of p is taken as reordering. None when any
    of these figures was not recorded."""
    if s.config.traffic.protocol is not Protocol.TCP:
        return None
    events = _senders_count(s, "reorder")
    lost_again = _senders_count(s, "lost_retransmit")
    found = _retransmit_share(s)
    dropped = drop_sites.dropped(s.metrics)
    if events is None or lost_again is None or found is None or dropped is None:
        return None
    share, retransmitted, sent = found
    lost = dropped + drop_sites.netem_dropped(s.metrics)
    if events < REORDER_EVENTS_MIN or share < RETRANSMIT_HEAVY_PCT or lost * 2 >= retransmitted:
        return None
    if lost_again >= retransmitted * share / 100 / 2:
        return None
    return Reordered(events, share, retransmitted, sent, lost, lost_again)


def reordering(s: Subject) -> Finding | None:
    """Packets that arrive out of order, which TCP takes for lost ones: a sender that
    sees later segments acknowledged first retransmits the "missing" one and shrinks its
    window, as it would for a loss. Parallel per-packet crypto (ESP spread over several
    cores) and several paths reorder; a FIFO does not. Its own verdict, apart from
    ``loss-heavy``, since the cure is different: nothing was lost."""
    found = _reordered(s)
    if found is None:
        return None
    evidence = [
        Evidence("reorder events (the senders' count)", found.events, ""),
        Evidence("retransmitted segments", found.retransmitted, ""),
        Evidence("segments sent", found.sent, ""),
        Evidence("retransmit share", found.share, "%"),
        Evidence("packets dropped", found.lost, "packets"),
        Evidence("retransmissions lost again", found.lost_again, ""),
    ]
    asked = ""
    if reorder := s.config.lab.wan.reorder:
        evidence.append(Evidence("lab.wan.reorder", reorder, "%"))
        asked = (
            f", with the WAN set to reorder {format_pct(reorder)} of the packets at each end"
            " (lab.wan.reorder)"
        )
    return Finding(
        Bound.REORDERING,
        f"packets arrived out of order: TCP's senders counted {found.events:,.0f} reorder"
        f" events and retransmitted {found.share:.2f}% of their segments"
        f" ({found.retransmitted:,.0f} of {found.sent:,.0f}) while {found.lost:,.0f} packets"
        f" were dropped on the way and {found.lost_again:,.0f} retransmissions were lost in"
        f" turn, so most retransmits were of segments that came late, not lost{asked}",
        tuple(evidence),
        subject="packet order",
    )


def loss_heavy(s: Subject) -> Finding | None:
    """UDP datagrams lost, or TCP segments retransmitted, beyond what a path at its limit
    shows; not when the retransmits are reordering (:func:`reordering`), unless the
    configuration asked for loss besides."""
    if s.config.traffic.protocol is Protocol.UDP:
        lost = s.metrics.get("udp.lost_pct")
        if lost is None or lost < UDP_LOSS_PCT:
            return None
        return Finding(
            Bound.LOSS,
            f"{lost:.2f}% of UDP datagrams were lost",
            (Evidence("UDP loss", lost, "%"),),
        )
    found = _retransmit_share(s)
    if found is None:
        return None
    share, total_retrans, total_sent = found
    if share < RETRANSMIT_HEAVY_PCT:
        return None
    if _reordered(s) is not None and not s.config.lab.wan.loss:
        return None
    evidence = [
        Evidence("retransmitted segments", total_retrans, ""),
        Evidence("segments sent", total_sent, ""),
        Evidence("retransmit share", share, "%"),
    ]
    return Finding(
        Bound.LOSS,
        f"{share:.2f}% of TCP segments were retransmitted"
        f" ({total_retrans:,.0f} of {total_sent:,.0f}){_emulated_loss(s, evidence)}",
        tuple(evidence),
    )


def _emulated_loss(s: Subject, evidence: list[Evidence]) -> str:
    """What the configuration's own loss (``lab.wan.loss``) accounts for, as a clause
    (and its evidence): loss asked for is not a fault to fix."""
    loss = s.config.lab.wan.loss
    if not loss:
        return ""
    evidence.append(Evidence("lab.wan.loss", loss, "%"))
    dropped = s.names("qdisc.", ".netem_drops")
    counted = ""
    if dropped:
        total = sum(s.metrics[n] for n in dropped)
        evidence.append(Evidence("netem drops", total, "packets"))
        counted = f"; netem dropped {total:,.0f} packets"
    return (
        f", with the WAN set to lose {format_pct(loss)} of the packets at each end"
        f" (lab.wan.loss{counted})"
    )


def latency_under_load(s: Subject) -> Finding | None:
    idle, loaded = s.metrics.get("rtt.idle_ms"), s.metrics.get("rtt.loaded_ms")
    if idle is None or loaded is None:
        return None
    extra = loaded - idle
    if extra < BLOAT_EXTRA_MS or loaded < BLOAT_FACTOR * idle:
        return None
    evidence = [Evidence("idle RTT", idle, "ms"), Evidence("RTT under load", loaded, "ms")]
    if (p95 := s.metrics.get("rtt.loaded_p95_ms")) is not None:
        evidence.append(Evidence("RTT under load p95", p95, "ms"))
    return Finding(
        Bound.LATENCY,
        f"latency under load {loaded:.1f} ms against {idle:.2f} ms idle (+{extra:.1f} ms):"
        " packets wait in a queue (bufferbloat)",
        tuple(evidence),
    )


Rule = Callable[[Subject], Finding | None]

# In order of precedence: the first that fires is the verdict.
RULES: tuple[Rule, ...] = (
    above_ceiling,
    link_bound,
    # A CPU budget before outside load and steal: the cgroup meters its processes' own
    # run time, which neither takes from them, so a role at its quota is held by the
    # quota whatever else ran (a tune test saw 1.0% steal outrank a 10% budget; an
    # outside-load note outranked a role throttled in 97% of its periods).
    cpu_budget_bound,
    role_budget_bound,
    # Outside load and steal are the verdict only where they could explain the figure
    # (DISTURBANCES); diagnose() tells them after the measured findings otherwise.
    outside_load,
    steal,
    thermal_limit,
    generator_bound,
    single_queue,
    cpu_bound,
    queue_below_bdp,
    queue_drops,
    reordering,
    loss_heavy,
    latency_under_load,
)


def undetermined(s: Subject) -> Finding:
    """No rule fired: say what was seen, so the reader can judge."""
    evidence = [Evidence("goodput", mbit(s.goodput_bps), "Mbit/s")]
    seen = [f"{mbit(s.goodput_bps):,.1f} Mbit/s"]
    if s.ceiling_bps:
        pct = 100.0 * s.goodput_bps / s.ceiling_bps
        evidence.append(Evidence("share of ceiling", pct, "%"))
        seen.append(f"{pct:.1f}% of the ceiling")
    if s.cores:
        core = max(s.cores, key=s.busy)
        evidence.append(Evidence(f"cpu{core} busy", s.busy(core), "%"))
        seen.append(f"busiest core {core_name(s, core)} at {s.busy(core):.0f}%")
    if processes := s.processes():
        label, pct = max(processes.items(), key=lambda item: item[1])
        evidence.append(Evidence(f"{label} CPU", pct, "%"))
        seen.append(f"busiest process {label} at {pct:.0f}% of a core")
    if (source := retransmit_source(s)) is not None:
        retransmits = s.metrics[source[0]]
        evidence.append(Evidence(f"TCP retransmits ({source[1]})", retransmits, ""))
        seen.append(f"{retransmits:,.0f} retransmits ({source[1]})")
    emulator = ""
    if s.resolved.virtualization == TCG and not emulator_busy(s):
        emulator = (
            "; measured on an emulated CPU (QEMU TCG) with no core saturated, so not the"
            " emulator's speed"
        )
    return Finding(
        Bound.UNDETERMINED,
        "no limit identified: " + ", ".join(seen) + emulator,
        tuple(evidence),
    )


#: Verdicts about where the work lands, not how fast a core is: an emulated guest slows
#: every core alike, so one core full while another idles is as true there.
SHAPE_BOUNDS = frozenset({Bound.SINGLE_QUEUE})
#: Verdicts that are about the network path, not the CPU: they stay valid in a guest
#: whose CPU QEMU emulates, as long as the guest keeps up with the link.
PATH_BOUNDS = frozenset(
    {
        Bound.ABOVE_CEILING,
        Bound.LINK,
        Bound.LINK_LOSSY,
        Bound.QUEUE_BELOW_BDP,
        Bound.QUEUE_DROPS,
        Bound.REORDERING,
        Bound.LOSS,
        Bound.LATENCY,
    }
)
#: Verdicts about the CPU work a packet costs: where the lab turned offloads off, each
#: host did a wire packet's work per packet, so such a limit is partly the lab's. (Not
#: single-queue: one core full while another idles is where the work lands, with or
#: without offloads; nor generator-bound, whose advice is the lab's traffic settings.)
PACKET_WORK_BOUNDS = frozenset({Bound.CPU})


def busiest_core(s: Subject) -> tuple[int, float] | None:
    """The busiest core and how busy it was (%); None without per-core figures."""
    if not s.cores:
        return None
    core = max(s.cores, key=s.busy)
    return core, s.busy(core)


def emulator_busy(s: Subject) -> bool:
    """Whether the emulated CPU could have set the figure: a core (or a process) of the
    guest at :data:`SATURATED_PCT`. Without per-core figures it cannot be ruled out."""
    busiest = busiest_core(s)
    if busiest is None:
        return True
    processes = s.processes().values()
    return busiest[1] >= SATURATED_PCT or any(p >= SATURATED_PCT for p in processes)


def emulated(s: Subject, verdict: Finding) -> Finding:
    """A lab in a guest under TCG that did not reach the link's limit while a core was
    saturated: what limited it is QEMU's emulation of a CPU, and no finding about cores
    says anything of hardware."""
    evidence = [Evidence("goodput", mbit(s.goodput_bps), "Mbit/s")]
    share = ""
    if s.ceiling_bps:
        pct = 100.0 * s.goodput_bps / s.ceiling_bps
        evidence.append(Evidence("share of ceiling", pct, "%"))
        share = f", {pct:.1f}% of the ceiling"
    if (busiest := busiest_core(s)) is not None:
        evidence.append(Evidence(f"cpu{busiest[0]} busy", busiest[1], "%"))
    return Finding(
        Bound.EMULATED,
        f"measured on an emulated CPU (QEMU TCG, kernel {s.resolved.kernel_release}):"
        f" {mbit(s.goodput_bps):,.1f} Mbit/s{share}, short of the link's limit, so the"
        f" emulator's speed set it; the rules would have said {verdict.bound.value}."
        " Only link-bound figures of such a guest are valid (shape the WAN link below"
        " what the guest sustains)",
        tuple(evidence),
    )


def _ranked(s: Subject, found: list[Finding]) -> list[Finding]:
    """The findings in order of precedence: a disturbance (outside load, steal) that
    could not explain the figure goes after the measured findings, and when nothing else
    was found the verdict is ``undetermined`` with the disturbance told after it."""
    leading = [f for f in found if f.bound not in DISTURBANCES or DISTURBANCES[f.bound](s)]
    after = [f for f in found if f not in leading]
    return (leading or [undetermined(s)]) + after


def _emulated_guest(s: Subject, found: list[Finding]) -> Diagnosis:
    """Under TCG: the path's findings hold in a guest too (a loss asked for, a queue's
    drops); what the emulator's speed set is no finding of the guest's, nor a basis for
    advice. A verdict about the CPU becomes ``emulated-cpu`` only where a core was busy:
    otherwise the emulator kept up and the path's own verdict stands (one flow under a
    5 ms AQM at a 40 ms round trip leaves the link short by design)."""
    valid = PATH_BOUNDS | SHAPE_BOUNDS
    kept = [f for f in found if f.bound in valid]
    if found[0].bound in valid:
        return Diagnosis(found[0], tuple(kept[1:]))
    if emulator_busy(s):
        return Diagnosis(emulated(s, found[0]), tuple(kept))
    if kept:
        return Diagnosis(kept[0], tuple(kept[1:]))
    return Diagnosis(undetermined(s), ())


def _lab_marked(s: Subject, finding: Finding) -> Finding:
    """A verdict about the CPU work per packet, named as the lab's where the lab turned
    the offloads off (:mod:`tunnelbench.analysis.lab_limits`); a CPU budget's verdict is
    the budget's, whatever the offloads."""
    if finding.bound not in PACKET_WORK_BOUNDS or _budget_held(finding):
        return finding
    limit = lab_limit(s.config, s.resolved)
    if limit is None:
        return finding
    return replace(
        finding,
        summary=f"{finding.summary}; a limit of the lab's: {limit.text()}, so every host"
        " handled each wire packet on its own, where a router's NIC bundles them",
        lab_setting=limit.label,
    )


def _budget_held(finding: Finding) -> bool:
    return any(e.name.startswith(("tunnel.cpu_budget", "lab.budget.")) for e in finding.evidence)


def diagnose(s: Subject) -> Diagnosis:
    found: list[Finding] = []
    for rule in RULES:
        finding = rule(s)
        # A CPU budget and a saturated core are one finding, told once.
        if finding is not None and finding.bound not in {f.bound for f in found}:
            found.append(finding)
    found = [_lab_marked(s, f) for f in _ranked(s, found)]
    if s.resolved.virtualization == TCG:
        return _emulated_guest(s, found)
    return Diagnosis(found[0], tuple(found[1:]))
