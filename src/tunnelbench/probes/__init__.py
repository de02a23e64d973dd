"""Probes of a trial.

Samplers that run during the measured window (per-core CPU, process CPU: ``sampler``),
and the trial probes read before and after the traffic (queue disciplines, interface
counters, TCP counters, round-trip time, CPU budgets): one module each, one interface
(:class:`TrialProbe`) and one registry, whose order is the order they run in.
"""

from tunnelbench.probes.budget import BudgetProbe
from tunnelbench.probes.links import LinkProbe
from tunnelbench.probes.qdisc import QdiscProbe
from tunnelbench.probes.rtt import RttProbe
from tunnelbench.probes.tcp import TcpProbe
from tunnelbench.probes.trial import ProbeKind, ProbeSet, TrialProbe
from tunnelbench.registry import Registry

REGISTRY: Registry[ProbeKind, type[TrialProbe]] = Registry("trial probe")
for _probe in (QdiscProbe, LinkProbe, TcpProbe, RttProbe, BudgetProbe):
    REGISTRY.register(_probe.kind, _probe)


def new_probe_set() -> ProbeSet:
    """A fresh instance of every registered probe, for one trial."""
    return ProbeSet(REGISTRY.get(kind)() for kind in REGISTRY.kinds())


__all__ = ["REGISTRY", "ProbeKind", "ProbeSet", "TrialProbe", "new_probe_set"]
