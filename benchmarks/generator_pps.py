"""The packet generators' own rates at 64-byte frames: trafgen against iperf3's UDP,
side by side in one lab (no tunnel, no shaper), three alternating rounds each.

For each: the rate it offered (frames over its run's time) and the rate the server's
device received (its kernel counter over the same time); the ratio trafgen ÷ iperf3 of
the received rates is the figure. Beside them, trafgen alone: into a veth pair whose far
end has no address (the kernel drops each frame on arrival), the generator's own ceiling.
Where it is well above what the lab received, the lab (the forwarding of each frame, in
softirq on the sending core) is the limit, not trafgen."""

import json
import statistics
import subprocess
import time
from pathlib import Path

from tunnelbench.bench import ratesearch
from tunnelbench.lab import netns
from tunnelbench.model import frames
from tunnelbench.model.plan import LabSettings
from tunnelbench.traffic import trafgen

FRAME = 64
ROUNDS = 3
SECONDS = 2
ASKED_PPS = 5_000_000  # above what either sends here: each runs flat out


def _rx_packets(lab: netns.Lab, device: str) -> int:
    return ratesearch.received(lab.host("server"), device)


def _trafgen(lab: netns.Lab, hop: trafgen.NextHop, device: str) -> tuple[float, float]:
    config = lab.files("client") / "bench.cfg"
    lab.host("client").write(config, trafgen.packet(hop, lab.server_address(4), 4, FRAME) + "\n")
    before = _rx_packets(lab, device)
    # About SECONDS at the rate it reached in a first try here (230 kpps).
    sent = trafgen.send(lab.host("client"), trafgen.PROGRAM, hop, config, 460_000, ASKED_PPS)
    return sent.pps, (_rx_packets(lab, device) - before) / sent.seconds


def _iperf3(lab: netns.Lab, device: str) -> tuple[float, float]:
    server = lab.start("server", ["iperf3", "-s", "-1", "-p", "5299"])
    time.sleep(0.3)
    before = _rx_packets(lab, device)
    payload = frames.udp_payload(FRAME, 4)
    done = lab.exec(
        "client",
        ["iperf3", "-c", lab.server_address(4), "-p", "5299", "-u", "-b", "0", "-l", str(payload),
         "-t", str(SECONDS), "-J"],
    )  # fmt: skip
    server.wait(10)
    total = json.loads(done.stdout)["end"]["sum"]
    return total["packets"] / total["seconds"], (_rx_packets(lab, device) - before) / total[
        "seconds"
    ]


def _alone() -> float:
    """trafgen's rate into a veth pair of its own, nothing behind it."""
    ns = "tb-bench-trafgen"
    config = Path("/run") / f"{ns}.cfg"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"],
                       check=True)  # fmt: skip
        for device in ("v0", "v1"):
            subprocess.run(["ip", "-n", ns, "link", "set", device, "up"], check=True)
        time.sleep(1.5)  # carrier
        hop = trafgen.NextHop("v0", "198.18.0.1", "02:00:00:00:00:02", "02:00:00:00:00:01")
        config.write_text(trafgen.packet(hop, "198.18.1.2", 4, FRAME) + "\n")
        count = 1_500_000
        argv = trafgen.argv(trafgen.PROGRAM, "v0", config, count, ASKED_PPS)
        began = time.monotonic()
        done = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                              timeout=60, check=True)  # fmt: skip
        seconds = time.monotonic() - began
        assert trafgen.parse(done.stdout).packets == count
        return count / seconds
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
        config.unlink(missing_ok=True)


def main() -> None:
    print(
        f"trafgen alone {FRAME} B: {_alone() / 1e3:,.0f} kpps (into a veth with nothing behind it)"
    )
    lab = netns.build(LabSettings())
    try:
        hop = trafgen.next_hop(lab.host("client"), lab.server_address(4), 4)
        device = trafgen.next_hop(lab.host("server"), hop.source, 4).device
        results: dict[str, list[tuple[float, float]]] = {"trafgen": [], "iperf3": []}
        for _ in range(ROUNDS):
            results["trafgen"].append(_trafgen(lab, hop, device))
            results["iperf3"].append(_iperf3(lab, device))
    finally:
        lab.teardown()
    received = {}
    for name, rounds in results.items():
        offered = statistics.median(r[0] for r in rounds)
        received[name] = statistics.median(r[1] for r in rounds)
        spread = ", ".join(f"{r[1] / 1e3:,.0f}" for r in rounds)
        print(f"{name:8s} {FRAME} B: offered {offered / 1e3:,.0f} kpps, received"
              f" {received[name] / 1e3:,.0f} kpps (rounds: {spread})")  # fmt: skip
    print(f"trafgen / iperf3, received: {received['trafgen'] / received['iperf3']:.2f}")


if __name__ == "__main__":
    main()
