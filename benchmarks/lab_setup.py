"""Lab set-up + teardown time (road-warrior). Goal: under 1 s."""

import statistics
import time

from tunnelbench.kinds import Topology, TunnelKind
from tunnelbench.lab import netns
from tunnelbench.model.plan import LabSettings, TunnelSettings
from tunnelbench.tunnels import REGISTRY

ROUNDS = 10


def measure(kind: TunnelKind, topology: Topology) -> list[float]:
    tunnel = REGISTRY.get(kind)
    spec = tunnel.resolve(TunnelSettings(kind=kind), 1500)
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        lab = netns.build(LabSettings(topology=topology), tunnel=kind is not TunnelKind.NONE)
        try:
            tunnel.setup(lab, spec)
        finally:
            lab.teardown()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    for topology in Topology:
        for kind in TunnelKind:
            times = measure(kind, topology)
            median = statistics.median(times)
            print(
                f"{topology.value:<13} {kind.value:<9}: set-up + teardown median "
                f"{median * 1000:.0f} ms, max {max(times) * 1000:.0f} ms over {ROUNDS} "
                f"({median:.2f}x of the 1 s goal)"
            )


if __name__ == "__main__":
    main()
