"""What the CPU says: a budget that held a process or a role, a saturated core the lab's own
work fills, the load generator at its limit, one queue's receive work on one core, and a
real DUT near its thermal trip point.

Busy cores are attributed: CPU time of processes outside the lab (``load.outside_pct``)
is not the configuration's limit, and a run recorded before that metric says so.
"""

import statistics

from tunnelbench.analysis.dut_rules import unseen
from tunnelbench.analysis.verdicts import (
    SATURATED_PCT,
    Bound,
    Evidence,
    Finding,
    Subject,
    core_name,
    dut,
    is_generator,
)
from tunnelbench.kinds import Placement, WanEncapsulation
from tunnelbench.model import metrics as metric

BUDGET_USED = 0.9  # a process using this fraction of its CPU budget is held by it
OUTSIDE_USER_PCT = 50.0  # runs without load.*: a saturated core mostly in user time...
OUTSIDE_LAB_PCT = 25.0  # ...while all lab processes together use less than this of a core
OUTSIDE_LOAD_PCT = 10.0  # outside processes using this much of one core are a finding
# A role's budget cgroup throttled in this share of the periods it had work is held by
# its budget (a role within its budget is throttled in none).
THROTTLED_PCT = 50.0
# A saturated core spending this much in softirq while another is idle: receive work one
# queue put on one core. "Idle" is at least half of a core free: a second queue there
# could take up to that much of the work. A core 82% busy (18% idle) is not idle: in a
# guest such a run got single-queue and "give each link 2 queues", which could win it a
# fifth of a core at most (a PPPoE session on one of two emulated cores left the other
# 18-31% idle, tests/kernel: busy with the generators, not free for a queue).
SINGLE_QUEUE_SOFTIRQ_PCT = 50.0
SPARE_IDLE_PCT = 50.0
# Real hosts: a DUT zone this close to its lowest trip point is being (or about to be)
# throttled; a core whose clock fell this far below its top was slowed.
TRIP_MARGIN_C = 5.0
CLOCK_SHORT_PCT = 10.0


def cpu_budget_bound(s: Subject) -> Finding | None:
    budget = s.config.tunnel.cpu_budget
    if budget is None:
        return None
    limit = 100.0 * budget
    held = {
        label: pct
        for label, pct in s.processes().items()
        if not is_generator(s, label) and pct >= BUDGET_USED * limit
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


def clock_short(s: Subject, core: int) -> tuple[float, float, float] | None:
    """(mean MHz, lowest MHz, top MHz) of a real DUT's core whose clock ran at least
    :data:`CLOCK_SHORT_PCT` below its top over the window; None otherwise."""
    remote = s.resolved.remote
    top = remote.max_mhz.get(core) if remote else None
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
    trips = s.resolved.remote.trips_c if s.resolved.remote else {}
    hot = []
    for zone, trip in sorted(trips.items()):
        reached = s.metrics.get(metric.thermal_max(owner, zone))
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
            if (label := metric.process_label(name)) is not None and is_generator(s, label)
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
    # On real hosts a black-box DUT may be near its own limit too: said, not guessed.
    outside, unseen_evidence = unseen(s)
    if times < runs:
        who = (
            f"the load generator's busiest process ({label} in {times} of {runs} runs,"
            " another in the rest)"
        )
    return Finding(
        Bound.GENERATOR,
        f"{who} used {used}"
        f" ({per_process} stream{'s' if per_process > 1 else ''} in that process): the"
        f" generator is the limit{outside}",
        (
            Evidence(
                f"{label} CPU" if times == runs else "busiest generator process CPU", pct, "%"
            ),
            Evidence("streams per generator process", per_process, ""),
            *unseen_evidence,
        ),
        subject=label,
    )


def lab_share(s: Subject) -> tuple[float, float, float] | None:
    """Busy time over all cores split by who used it, in % of one core: (everything but
    outside processes, the lab's processes, outside processes); None for runs recorded
    before the load probes. What is not outside (the lab's processes, softirq, irq and
    kernel threads such as the kernel's crypto workers) is the lab's work."""
    outside = s.metrics.get(metric.LOAD_OUTSIDE.name)
    if outside is None:
        return None
    busy = sum(s.busy(c) for c in s.cores)
    return max(0.0, busy - outside), s.metrics.get(metric.LOAD_LAB.name, 0.0), outside


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
    lab_processes = sum(s.processes().values())
    attribution = lab_share(s)
    filled = len(saturated)
    if attribution is None:
        if split["user"] >= OUTSIDE_USER_PCT and lab_processes < OUTSIDE_LAB_PCT:
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
    hot = {label: pct for label, pct in s.processes().items() if not is_generator(s, label)}
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
