"""Lab set-up + teardown time (road-warrior). Goal: under 1 s.

And side by side, how long a veth pair across two fresh namespaces takes to come up
when its ends share an interface index (the kernel's choice) and when each has its own
(what a lab does: tunnelbench.lab.netns.link_indexes)."""

import json
import statistics
import subprocess
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


def carrier_s(indexes: tuple[int, int] | None) -> float:
    """Seconds from setting both ends of a new pair up until both report carrier."""
    a, b = "tb-bench-carrier-a", "tb-bench-carrier-b"
    left, right = (["index", str(i)] for i in indexes) if indexes else ([], [])
    try:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(
            ["ip", "-n", a, "link", "add", "v0", *left, "type", "veth", "peer", "name", "v1",
             *right, "netns", b],
            check=True,
        )  # fmt: skip
        start = time.perf_counter()
        for ns, dev in ((a, "v0"), (b, "v1")):
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        while True:
            states = [
                json.loads(
                    subprocess.run(
                        ["ip", "-n", ns, "-j", "link", "show", "type", "veth"],
                        check=True, capture_output=True, text=True,
                    ).stdout
                )[0]["operstate"]
                for ns in (a, b)
            ]  # fmt: skip
            if states == ["UP", "UP"]:
                return time.perf_counter() - start
            time.sleep(0.002)
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)


def carrier() -> None:
    shared = [carrier_s(None) for _ in range(ROUNDS)]
    own = [carrier_s(netns.link_indexes(0)) for _ in range(ROUNDS)]
    a, b = statistics.median(shared), statistics.median(own)
    print(
        f"veth carrier: ends of one index {a * 1000:.0f} ms, of their own {b * 1000:.0f} ms"
        f" (median of {ROUNDS}; {a / b:.0f}x)"
    )


def main() -> None:
    carrier()
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
