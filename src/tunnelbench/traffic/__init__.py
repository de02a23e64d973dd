"""Load generators: one module each, one interface (:class:`Generator`) and one registry."""

from tunnelbench.kinds import Generator as GeneratorKind
from tunnelbench.registry import Registry
from tunnelbench.traffic.base import Generator, TrafficResult
from tunnelbench.traffic.iperf2 import Iperf2
from tunnelbench.traffic.iperf3 import Iperf3

REGISTRY: Registry[GeneratorKind, Generator] = Registry("traffic generator")
REGISTRY.register(GeneratorKind.IPERF3, Iperf3())
REGISTRY.register(GeneratorKind.IPERF2, Iperf2())

__all__ = ["REGISTRY", "Generator", "TrafficResult"]
