"""A router tunnelbench could not log into, measured from outside: what its SNMP agent
showed (the whole box's CPU time, its interfaces' counters), and what cannot be known of
it, said in the verdict rather than guessed.

The interface counters an agent serves are read as ``link.<dut>.<interface>.*``, so the
queue and drop rules read them as they read a host's over SSH; the CPU is the one figure
of its own here: every core's time together, which shows a box that is busy all over but
not one core saturated while others idle (a single flow's work on one core of four reads
as 25%).
"""

from tunnelbench.analysis.verdicts import SATURATED_PCT, Bound, Evidence, Finding, Subject, dut
from tunnelbench.model import metrics as metric
from tunnelbench.model.remotefacts import NONE, SNMP


def view(s: Subject) -> str | None:
    """How a real-hosts run saw its DUT; None in a lab (or a run recorded before)."""
    return s.resolved.remote.dut_view if s.resolved.remote else None


def black_box(s: Subject) -> bool:
    return view(s) in (SNMP, NONE)


def _served(s: Subject, key: str) -> float | None:
    """A figure of what the DUT's SNMP agent serves (``cores``, ``cache_s``)."""
    served = s.resolved.remote.dut_snmp if s.resolved.remote else None
    value = getattr(served, key) if served else None
    return float(value) if isinstance(value, int | float) and value >= 0 else None


def black_box_cpu(s: Subject) -> Finding | None:
    """A black-box DUT whose agent counted every core at :data:`SATURATED_PCT` or more
    busy over the window: the router's CPU held the traffic (all of it: the figure is
    every core together)."""
    owner = dut(s)
    if owner is None or not black_box(s):
        return None
    busy = s.metrics.get(metric.snmp(owner, metric.SNMP_CPU_BUSY))
    if busy is None or busy < SATURATED_PCT:
        return None
    evidence = [Evidence(f"{owner} CPU, every core (SNMP)", busy, "%")]
    covered = s.metrics.get(metric.snmp(owner, metric.SNMP_CPU_COVERED))
    over = ""
    if covered is not None:
        evidence.append(Evidence("seconds the agent's counters covered", covered, "s"))
        over = f" over the {covered:.1f} s its agent's counters covered"
    if (softirq := s.metrics.get(metric.snmp(owner, metric.SNMP_CPU_SOFTIRQ))) is not None:
        evidence.append(Evidence(f"{owner} softirq (SNMP)", softirq, "%"))
    return Finding(
        Bound.CPU,
        f"the DUT {owner} (read over SNMP, no login) was {busy:.0f}% busy on every core"
        f" together{over}: its CPU held the traffic",
        tuple(evidence),
        subject=owner,
    )


def unseen(s: Subject) -> tuple[str, list[Evidence]]:
    """What could not be known of a black-box DUT, as a clause for a verdict that found
    no limit (empty in a lab or for a DUT logged into), with the SNMP CPU figure where
    there is one."""
    owner = dut(s)
    if owner is None or not black_box(s):
        return "", []
    clause = (
        f"; the DUT {owner} is a black box (no login): its per-core CPU, processes and"
        " queues could not be seen"
    )
    evidence: list[Evidence] = []
    busy = s.metrics.get(metric.snmp(owner, metric.SNMP_CPU_BUSY))
    if busy is not None:
        evidence.append(Evidence(f"{owner} CPU, every core (SNMP)", busy, "%"))
        cores = _served(s, "cores")
        one = (
            f"; one saturated core of its {cores:.0f} would read {100 / cores:.0f}%"
            if cores and cores > 1
            else ""
        )
        clause += f"; over SNMP every core together was {busy:.0f}% busy{one}"
    elif (covered := s.metrics.get(metric.snmp(owner, metric.SNMP_CPU_COVERED))) is not None:
        cache = _served(s, "cache_s") or 0.0
        clause += (
            f"; its SNMP CPU counters covered {covered:.1f} s, which an agent's cache of up to"
            f" {cache:g} s cannot place inside the window (a CPU figure needs"
            f" {2 * cache:g} s or more: a longer traffic.duration)"
        )
    elif view(s) == SNMP:
        clause += "; its SNMP agent gave no CPU figure for the window"
        every = s.metrics.get(metric.snmp(owner, metric.SNMP_CPU_REFRESH))
        if every is not None:  # stored with the trial's reason (a warning while it ran)
            clause += f" (its CPU counters refresh every {every:g} s: two refreshes within"
            clause += " the traffic are needed, their span checked against the window's)"
    else:
        clause += "; give its SNMP agent (snmp, community) to read its counters"
    return clause, evidence
