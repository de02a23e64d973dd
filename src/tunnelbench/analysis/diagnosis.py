"""What held a configuration back: a verdict with the numbers that support it.

Each rule reads the medians of a configuration's successful trials (per-core CPU,
per-process CPU, qdisc and link counters, TCP counters, RTT under load) and the
theoretical ceiling, and either finds its situation, with evidence, or stays silent. The
rules are tried in the order of :data:`RULES`; the first that fires is the verdict and the
others are listed as further findings. When none fires the verdict is ``undetermined``
with what was seen: a rule that would need a guess stays silent instead.

The rules live by cause: the path (:mod:`.path_rules`), loss and reordering
(:mod:`.loss_rules`), the CPU (:mod:`.cpu_rules`), a router seen only from outside
(:mod:`.dut_rules`), and the machine around the lab (:mod:`.disturbance`); what they
speak of, and the thresholds they share, in :mod:`.verdicts`. This module orders them
and decides what they say together:

- outside load and steal are about the machine, not the configuration: they outrank the
  measured cause only where they could explain the shortfall from the ceiling (the
  typical run's figures, :data:`~.disturbance.DISTURBANCES`), and are told after it
  otherwise;
- in a guest whose CPU QEMU emulates, a verdict about the CPU becomes ``emulated-cpu``
  only where a core was busy; otherwise the path's own finding stands;
- a CPU verdict of a trial whose lab turned the offloads off is named as the lab's
  (:mod:`.lab_limits`).
"""

from collections.abc import Callable
from dataclasses import replace

from tunnelbench.analysis.cpu_rules import (
    OUTSIDE_LOAD_PCT,
    SPARE_IDLE_PCT,
    cpu_bound,
    cpu_budget_bound,
    generator_bound,
    generator_cores,
    role_budget_bound,
    single_queue,
    thermal_limit,
    threaded_generator,
)
from tunnelbench.analysis.disturbance import (
    DISTURBANCES,
    STEAL_PCT,
    STEAL_VERDICT_PCT,
    heavy_steal,
    outside_load,
    steal,
    worst_steal,
)
from tunnelbench.analysis.dut_rules import black_box_cpu, unseen
from tunnelbench.analysis.lab_limits import lab_limit
from tunnelbench.analysis.loss_rules import (
    RETRANSMIT_HEAVY_PCT,
    loss_heavy,
    lossy_runs,
    reordering,
    retransmit_source,
)
from tunnelbench.analysis.path_rules import (
    above_ceiling,
    latency_under_load,
    link_bound,
    queue_below_bdp,
    queue_drops,
)
from tunnelbench.analysis.verdicts import (
    ABOVE_CEILING_PCT,
    LINK_BOUND_PCT,
    SATURATED_PCT,
    Bound,
    Diagnosis,
    Evidence,
    Finding,
    Subject,
    core_name,
    dut,
    mbit,
    medians,
)
from tunnelbench.model.records import TCG

#: What callers import from here: the vocabulary, the thresholds and rules they name.
#: The rules themselves live by cause (cpu_rules, disturbance, loss_rules, path_rules).
__all__ = [
    "ABOVE_CEILING_PCT",
    "LINK_BOUND_PCT",
    "OUTSIDE_LOAD_PCT",
    "RETRANSMIT_HEAVY_PCT",
    "RULES",
    "SATURATED_PCT",
    "SPARE_IDLE_PCT",
    "STEAL_PCT",
    "STEAL_VERDICT_PCT",
    "Bound",
    "Diagnosis",
    "Evidence",
    "Finding",
    "Subject",
    "core_name",
    "cpu_bound",
    "diagnose",
    "dut",
    "emulated",
    "generator_bound",
    "generator_cores",
    "heavy_steal",
    "medians",
    "queue_below_bdp",
    "retransmit_source",
    "steal",
    "threaded_generator",
    "undetermined",
    "worst_steal",
]

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
    black_box_cpu,
    queue_below_bdp,
    queue_drops,
    reordering,
    loss_heavy,
    latency_under_load,
)


#: The rules about loss: where some runs reordered and others did not, they judge the
#: others alone (:func:`~tunnelbench.analysis.loss_rules.lossy_runs`).
LOSS_RULES: frozenset[Rule] = frozenset({queue_below_bdp, queue_drops, loss_heavy})


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
    outside, seen_outside = unseen(s)
    evidence += seen_outside
    emulator = ""
    if s.resolved.where.virtualization == TCG and not emulator_busy(s):
        emulator = (
            "; measured on an emulated CPU (QEMU TCG) with no core saturated, so not the"
            " emulator's speed"
        )
    return Finding(
        Bound.UNDETERMINED,
        "no limit identified: " + ", ".join(seen) + outside + emulator,
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
        f"measured on an emulated CPU (QEMU TCG, kernel {s.resolved.where.kernel_release}):"
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


def _judged(s: Subject, rule: Rule, split: tuple[Subject, str] | None) -> Finding | None:
    """``rule``'s finding; a loss rule's over the runs that did not reorder when the runs
    disagree, saying so."""
    if split is None or rule not in LOSS_RULES:
        return rule(s)
    finding = rule(split[0])
    return None if finding is None else replace(finding, summary=finding.summary + split[1])


#: The fewest successful runs a verdict is drawn from when others failed: one run left of
#: several says nothing of the runs that did not finish (in a guest, the one run left of
#: three got ``single-queue`` and "give each link 2 queues").
VERDICT_RUNS_MIN = 2


def survivors(s: Subject, d: Diagnosis) -> Diagnosis:
    """A verdict drawn from what is left where some runs failed: withheld when fewer than
    :data:`VERDICT_RUNS_MIN` succeeded ("1 of 3 runs; no verdict", with what the run
    measured), else marked with how many it rests on. A configuration whose runs all
    succeeded is as diagnosed."""
    if not s.failed:
        return d
    ok = len(s.runs) or 1
    total = ok + s.failed
    if ok >= VERDICT_RUNS_MIN:
        marked = replace(
            d.verdict,
            summary=f"{d.verdict.summary}; from the {ok} of {total} runs that succeeded"
            f" ({s.failed} failed)",
        )
        return Diagnosis(marked, d.others)
    seen = undetermined(s)
    measured = seen.summary.removeprefix("no limit identified: ")
    return Diagnosis(
        Finding(
            Bound.TOO_FEW_RUNS,
            f"{ok} of {total} runs; no verdict: {s.failed} failed, and the one left is no"
            f" basis for one (it measured {measured})",
            (
                Evidence("runs that succeeded", ok, ""),
                Evidence("runs that failed", s.failed, ""),
                *seen.evidence,
            ),
            subject="runs",
        )
    )


def diagnose(s: Subject) -> Diagnosis:
    """The verdict and the further findings of one configuration (the module's docstring
    says how they are ordered), from what is left where some runs failed
    (:func:`survivors`)."""
    return survivors(s, _diagnosed(s))


def _diagnosed(s: Subject) -> Diagnosis:
    found: list[Finding] = []
    split = lossy_runs(s)
    for rule in RULES:
        finding = _judged(s, rule, split)
        # A CPU budget and a saturated core are one finding, told once.
        if finding is not None and finding.bound not in {f.bound for f in found}:
            found.append(finding)
    found = [_lab_marked(s, f) for f in _ranked(s, found)]
    if s.resolved.where.virtualization == TCG:
        return _emulated_guest(s, found)
    return Diagnosis(found[0], tuple(found[1:]))
