"""Trial probes in real runs: qdisc drops on a shaped WAN, TCP counters, interface
counters of the tunnel device, and round-trip time under load (real labs, iperf3, ping)."""

from pathlib import Path

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.store import Store
from tunnelbench.model.records import TrialRecord

SHORT = ["--runs", "1", "--duration", "2", "--warmup", "1", "-q", "--no-reports"]


def _trials(db: Path) -> tuple[Store, list[TrialRecord]]:
    store = Store(db)
    return store, store.trials(store.run("latest").id)


def _received_bytes(doc) -> int:
    return sum(int(doc["end"][k]["bytes"]) for k in doc["end"] if k.startswith("sum_received"))


def test_a_tiny_shaped_queue_drops_and_tcp_retransmits(tmp_path):
    db = tmp_path / "r.db"
    done = tunnelbench(
        "run", "--tunnels", "wireguard", "--streams", "4", "--stream-mode", "single",
        "--rate", "100mbit", "--queue-limit", "5", *SHORT, "--db", str(db),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    store, trials = _trials(db)
    assert [t.config.tunnel.kind for t in trials] == ["none", "wireguard"]
    for trial in trials:
        assert trial.status == "ok", trial.error
        m = trial.metrics
        # Upload: the client's end of the WAN is the bottleneck, a 5-packet pfifo under tbf.
        assert m["qdisc.client.wan.drops"] > 0
        assert m["qdisc.client.wan.leaf_drops"] == m["qdisc.client.wan.drops"]
        assert m["qdisc.client.wan.overlimits"] > 0
        assert m["qdisc.client.wan.sent_bytes"] > 0
        assert "qdisc.gw.lan.drops" not in m  # the LAN veths are noqueue
        # The namespace counts every retransmission, warm-up included; iperf3 only those
        # of its measured part.
        assert m["tcp.client.retrans_segs"] >= m["retransmits"] > 0
        assert m["tcp.client.out_segs"] > m["tcp.client.retrans_segs"]
        assert m["tcp.server.in_segs"] > 0
        # Every veth end and counter is there.
        for role, link in (("client", "wan"), ("gw", "wan"), ("gw", "lan"), ("server", "lan")):
            assert m[f"link.{role}.{link}.tx_packets"] > 0
            assert m[f"link.{role}.{link}.rx_errors"] == 0
        # Ping crossed the same path as iperf3 (same target) and covered the window:
        # 2 s at 10 requests per second; a saturated 2-core machine delays ping's own
        # sends now and then, so some of the 20 slots go unused (as many as 11 in CI).
        assert 5 <= m["rtt.samples"] + m["rtt.lost"] <= 22
        assert m["rtt.idle_ms"] > 0 and m["rtt.loaded_max_ms"] >= m["rtt.loaded_ms"]
        raw = store.artifact(trial.id, "probe_readings")
        docs = store.artifact(trial.id, "iperf3")  # one per stream (a process each)
        assert {raw["rtt"]["target"]} == {d["start"]["connected"][0]["remote_host"] for d in docs}
        assert set(raw) == {"qdisc", "links", "tcp", "rtt", "budget", "seconds"}
        assert raw["budget"] == {"before": {}, "after": {}}  # no lab.budget: nothing read
        assert m["probes.overhead_s"] < 1.0  # timing limits live in benchmarks/
    wireguard = trials[1].metrics
    docs = store.artifact(trials[1].id, "iperf3")
    # The receiving tunnel end decapsulated at least every byte iperf3 counted.
    assert wireguard["tunnel.gw.rx_bytes"] >= sum(_received_bytes(d) for d in docs) > 0
    assert wireguard["link.gw.tunnel.rx_packets"] == wireguard["tunnel.gw.rx_packets"] > 0
    assert wireguard["qdisc.client.tunnel.sent_packets"] > 0  # wireguard-go's TUN: pfifo_fast
    assert "link.client.tunnel.tx_packets" in wireguard


def test_a_full_fifo_on_the_shaped_link_raises_the_loaded_rtt(tmp_path):
    db = tmp_path / "r.db"
    # Download over a 100 Mbit/s link with a 1000-packet FIFO: the queue that fills is the
    # gateway's (forwarding), which TCP Small Queues does not keep short.
    done = tunnelbench(
        "run", "--tunnels", "none", "--streams", "1", "--direction", "download",
        "--rate", "100mbit", *SHORT, "--db", str(db),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _, (trial,) = _trials(db)
    assert trial.status == "ok", trial.error
    m = trial.metrics
    assert m["rtt.loaded_ms"] > 3 * m["rtt.idle_ms"]
    assert m["qdisc.gw.wan.sent_bytes"] > m["qdisc.client.wan.sent_bytes"]
