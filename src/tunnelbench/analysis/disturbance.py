"""Findings about the machine rather than the configuration: processes outside the lab
that used the CPU, and time the hypervisor stole from the cores. Each is found by the worst
run (one disturbed run moves a median of three), and outranks the measured cause only
where it could explain the shortfall, by the typical run's figures (:data:`DISTURBANCES`).
"""

import statistics
from collections.abc import Callable

from tunnelbench.analysis.cpu_rules import OUTSIDE_LOAD_PCT, lab_share
from tunnelbench.analysis.verdicts import (
    LINK_BOUND_PCT,
    SATURATED_PCT,
    Bound,
    Evidence,
    Finding,
    Subject,
    share_of_ceiling,
)
from tunnelbench.model import metrics as metric

# The hypervisor running something else on a core for this share of the window: an idle
# guest here reads 0.0%, and a CPU-bound figure loses about as much as was stolen.
STEAL_PCT = 1.0
# Without a ceiling to measure the shortfall against, steal this large in the typical run
# outranks the CPU verdicts: below it, the loss is within the 2-3% spread of a CPU-bound
# figure between runs here and cannot change which resource is the limit (CI saw 1.1%
# steal in one run of four outrank a saturated iperf3), so it is told after.
STEAL_VERDICT_PCT = 5.0


def outside_load(s: Subject) -> Finding | None:
    """Processes outside the lab used the CPU during a measured window: judged by the
    worst run, since one disturbed run is enough to move a median of three. With a
    saturated core the figure is not trustworthy (the lab competed for the CPU); without
    one it probably cost little, and the finding says which."""
    outside = s.per_run(metric.LOAD_OUTSIDE.name)
    if not outside or max(outside) < OUTSIDE_LOAD_PCT:
        return None
    worst = max(outside)
    disturbed = sum(1 for v in outside if v >= OUTSIDE_LOAD_PCT)
    runs = f" in {disturbed} of {len(outside)} runs" if len(outside) > 1 else ""
    named = ", ".join(f"{name} {pct:.0f}%" for name, pct in s.outside_processes[:3])
    who = f" ({named})" if named else ""
    saturated = any(s.busy(c) >= SATURATED_PCT for c in s.cores)
    lab = s.metrics.get(metric.LOAD_LAB.name)
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
    """Steal of at least :data:`STEAL_VERDICT_PCT` in the worst run: the finding
    :func:`steal` makes from :data:`STEAL_PCT` on, for callers that want only the heavy
    kind (whether it is the verdict is :func:`steal_explains`'s to say)."""
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
    pct = share_of_ceiling(s)
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
    pct = share_of_ceiling(s)
    attribution = lab_share(s)
    if pct is None or attribution is None:
        return True
    lab_work = attribution[0]
    outside = statistics.median(s.per_run(metric.LOAD_OUTSIDE.name))
    return lab_work <= 0 or pct * (lab_work + outside) / lab_work >= LINK_BOUND_PCT


#: Findings about the machine rather than the configuration, with what decides whether
#: they could explain its figure: only then do they outrank the measured cause.
DISTURBANCES: dict[Bound, Callable[[Subject], bool]] = {
    Bound.OUTSIDE_LOAD: outside_explains,
    Bound.STEAL: steal_explains,
}
