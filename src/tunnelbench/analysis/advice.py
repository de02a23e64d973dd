"""Turns a diagnosis into concrete suggestions, each naming the setting to change.

A suggestion cites the evidence that triggered it, and a measured alternative replaces
the generic hint (:mod:`tunnelbench.analysis.suggestion` says how it is judged).

Advice respects what this machine can do: a suggestion that needs a kernel feature
(kernel WireGuard, fq_codel or cake, kernel ESP, OpenVPN's DCO) reads the capabilities
the run recorded (:func:`tunnelbench.bench.environment.capability_record`) and, where the
kernel lacks it, says so with the kernel's reason ("not available on this kernel (...);
on a kernel with it: ..."). A run recorded before capabilities were says "availability
not recorded".

Advice follows the cause the diagnosis named, not a near one: queue advice is for the
queue that dropped (:mod:`.queue_advice`); a CPU limit the lab set (offloads off) is
advised as the lab's setting, never the router's; and a crypto driver is advised only
for a tunnel whose kind declares that its crypto goes through the kernel's crypto API.

Advice follows the verdict: a configuration at its link's ceiling (``link-bound``,
``link-bound-lossy``, ``above-ceiling``) is told nothing that rests on its CPU or its load
generator (:data:`AT_CEILING`, :data:`SPEED_RULES`), since nothing faster there can
carry more than the link: a baseline at 100.0% of its ceiling was told "run one generator
process per stream". A measured alternative still speaks for itself
(:func:`~tunnelbench.analysis.cpu_advice.faster_userspace`).
"""

from collections.abc import Sequence

from tunnelbench.analysis.cpu_advice import (
    accelerated_crypto,
    faster_userspace,
    frequency_scaling,
    kernel_data_path,
    lab_offloads,
    more_queues,
    raise_cpu_budget,
    raise_role_budget,
    spread_softirq,
)
from tunnelbench.analysis.diagnosis import (
    Bound,
    Diagnosis,
    Subject,
    dut,
)
from tunnelbench.analysis.dut_advice import dut_crypto_driver, dut_receive_spread
from tunnelbench.analysis.generator_advice import generator_processes, several_flows
from tunnelbench.analysis.path_advice import reordered_packets, tunnel_mtu
from tunnelbench.analysis.queue_advice import (
    fair_queue,
    larger_queue,
    queue_for_bdp,
    shorter_queue,
    tunnel_queue,
)
from tunnelbench.analysis.suggestion import Advice as Advice
from tunnelbench.analysis.suggestion import AdviceRule, Context
from tunnelbench.analysis.suggestion import Availability as Availability
from tunnelbench.analysis.suggestion import Measured as Measured
from tunnelbench.analysis.suggestion import Sibling as Sibling
from tunnelbench.analysis.suggestion import availability as availability
from tunnelbench.model.plan import WAN_TC_SETTINGS, LinkSettings

RULES: tuple[AdviceRule, ...] = (
    lab_offloads,
    # Before the CPU's advice: a small MTU multiplies the packets every core handles.
    tunnel_mtu,
    kernel_data_path,
    faster_userspace,
    raise_cpu_budget,
    raise_role_budget,
    more_queues,
    generator_processes,
    several_flows,
    spread_softirq,
    tunnel_queue,
    fair_queue,
    larger_queue,
    queue_for_bdp,
    shorter_queue,
    reordered_packets,
    accelerated_crypto,
    frequency_scaling,
    dut_receive_spread,
    dut_crypto_driver,
)


#: Verdicts at the link's limit: no CPU or generator setting can carry more.
AT_CEILING = frozenset({Bound.LINK, Bound.LINK_LOSSY, Bound.ABOVE_CEILING})
#: The hints that make the endpoints or the generator faster: none of them helps a
#: configuration whose verdict is in :data:`AT_CEILING`.
SPEED_RULES: frozenset[AdviceRule] = frozenset(
    {
        kernel_data_path,
        raise_cpu_budget,
        raise_role_budget,
        more_queues,
        generator_processes,
        several_flows,
        spread_softirq,
        accelerated_crypto,
        frequency_scaling,
        dut_receive_spread,
        dut_crypto_driver,
    }
)


# Measured gains first, then undecided measurements, then hints, refuted ones last.
_ORDER = {"gain": 0, "too few runs": 1, None: 2, "no difference": 3, "slower": 3}


def advise(subject: Subject, diagnosis: Diagnosis, run: Sequence[Sibling]) -> list[Advice]:
    """Every suggestion for one configuration: measured gains first, refuted ones last."""
    if diagnosis.verdict.bound is Bound.EMULATED:
        return []  # an emulated CPU's limits say nothing of a real router's settings
    if diagnosis.verdict.bound is Bound.TOO_FEW_RUNS:
        return []  # no verdict, no advice
    context = Context(subject, diagnosis, run)
    at_ceiling = diagnosis.verdict.bound in AT_CEILING
    rules = [r for r in RULES if not (at_ceiling and r in SPEED_RULES)]
    found = [a for a in (rule(context) for rule in rules) if a is not None]
    if dut(subject) is not None:
        # A real router has none of the lab's settings; its own are advised instead. Only
        # lab.wan's queue and shaper, where the configuration put them on the real WAN
        # link, are tunnelbench's there too (tune --hosts tries them).
        found = [a for a in found if applies_on_hosts(a.setting, subject.config.lab.wan)]
    return sorted(found, key=lambda a: _ORDER[a.measured.outcome if a.measured else None])


def applies_on_hosts(setting: str | None, wan: LinkSettings) -> bool:
    """Whether advice on ``setting`` applies to real hosts whose trials set ``wan``."""
    if not (setting or "").startswith("lab."):
        return True
    name = (setting or "").removeprefix("lab.wan.")
    default = LinkSettings()
    shaped = any(getattr(wan, n) != getattr(default, n) for n in WAN_TC_SETTINGS)
    return shaped and name in WAN_TC_SETTINGS
