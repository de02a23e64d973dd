"""A shaped link's queue limit counts wire packets, not GSO/GRO bundles.

A qdisc counts what it is handed, and the kernel segments a GSO bundle only after the
qdisc, when the device sends it: with the kernel's default offloads a 50-packet FIFO
held up to 50 bundles of up to ~45 packets each. The qdisc's own packet counter counts
segments; the veth's transmit counter counts what the qdisc handed it. Equal counts mean
no bundles reached the queue.
"""

from pathlib import Path

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.store import Store

PLAN = """
name = "shaped-queue"
repetitions = 1
[base.lab]
topology = "road-warrior"
[base.lab.wan]
rate = "1gbit"
shaper = "htb"
queue = "pfifo"
queue_limit = 50
[base.traffic]
streams = 2
stream_mode = "single"
duration = 1
warmup = 1
[matrix]
offloads = [
    {{ "lab.offloads.gro" = false }},
    {{ "lab.offloads.gso" = true, "lab.offloads.tso" = true }},
]
"""


def test_offloads_are_off_on_a_shaped_lab_unless_asked_for(tmp_path: Path):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.format())
    db = tmp_path / "r.db"
    done = tunnelbench("run", str(plan), "-q", "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    store = Store(db)
    default, asked = store.trials(store.run("latest").id)
    assert default.status == asked.status == "ok", (default.error, asked.error)
    off = {"gro": False, "gso": False, "tso": False}
    assert default.resolved.to_dict()["offloads"] == {r: off for r in ("client", "gw", "server")}
    assert asked.resolved.to_dict()["offloads"]["client"] == {
        "gso": True,
        "tso": True,
        "gro": False,
    }

    def bundling(metrics: dict[str, float]) -> float:
        """Packets the queue counted per packet it handed the device (the upload's
        queue: the client's WAN egress, in the road-warrior lab)."""
        return metrics["qdisc.client.wan.sent_packets"] / metrics["link.client.wan.tx_packets"]

    assert 0.99 < bundling(default.metrics) < 1.01
    assert bundling(asked.metrics) > 5  # bundles of several segments each
