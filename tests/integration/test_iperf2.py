"""`tunnelbench run` with traffic.generator = "iperf2": real labs, wireguard-go, iperf 2.1.8.

Each test runs one small plan (1 s of warm-up, 1 s measured) through no tunnel and
wireguard-go, and checks the goodput against what the lab's own counters saw: the
receiving tunnel end decapsulated at least every byte iperf2's receivers counted, and
without a tunnel the sender's WAN qdisc (a plain pfifo, so that the veth has byte
counters) sent at least as much.
"""

from pathlib import Path

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.store import Store
from tunnelbench.kinds import Direction
from tunnelbench.model.records import TrialRecord
from tunnelbench.traffic import iperf2, iperf2_csv

PLAN = """
name = "iperf2-{name}"
repetitions = 1

[base.lab.wan]
queue = "pfifo"

[base.tunnel]
kind = "wireguard"
implementation = "wireguard-go"

[base.traffic]
generator = "iperf2"
warmup = 1
duration = 1
{traffic}

[matrix]
{matrix}
"""
# What the receiving end's counters are, per direction: (tunnel end, sending WAN end).
RECEIVING = {Direction.UPLOAD: ("gw", "client"), Direction.DOWNLOAD: ("client", "gw")}


def run_plan(tmp_path: Path, name: str, traffic: str, matrix: str) -> tuple[Store, list]:
    plan = tmp_path / f"{name}.toml"
    plan.write_text(PLAN.format(name=name, traffic=traffic, matrix=matrix))
    db = tmp_path / "r.db"
    done = tunnelbench("run", str(plan), "-q", "--no-reports", "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    store = Store(db)
    trials = store.trials(store.run("latest").id)
    assert trials and all(t.status == "ok" for t in trials), [t.error for t in trials]
    return store, trials


def sent(store: Store, trial: TrialRecord) -> int:
    """Bytes iperf2's client reported sending upstream over the whole test."""
    settings = trial.config.traffic
    target = ("198.18.1.2" if settings.family == 4 else "2001:2:0:1::2", iperf2.PORT)
    outputs = {r["role"]: r["stdout"] for r in store.artifact(trial.id, "iperf2")}
    lines = iperf2_csv.parse(outputs["client"], "client", settings.protocol)
    reports = iperf2_csv.stream_reports(lines, "client")
    ours = [r for r in reports if iperf2_csv.direction_of(r, target) is Direction.UPLOAD]
    assert ours, "the client reported no upstream stream"
    return sum(r.total.bytes for r in ours)


def whole_test_loss(store: Store, trial: TrialRecord) -> float:
    """The server's lost datagrams over the whole test, in % of those it expected (its
    final lines: warm-up included, as the byte counts are)."""
    settings = trial.config.traffic
    outputs = {r["role"]: r["stdout"] for r in store.artifact(trial.id, "iperf2")}
    lines = iperf2_csv.parse(outputs["server"], "server", settings.protocol)
    finals = [r.total.udp for r in iperf2_csv.stream_reports(lines, "server")]
    lost = sum(u.lost for u in finals if u is not None)
    expected = sum(u.total for u in finals if u is not None)
    assert expected > 0
    return 100 * lost / expected


def received(store: Store, trial: TrialRecord) -> dict[Direction, int]:
    """Bytes iperf2's receivers counted over the whole test (their final lines), per
    direction: the server's for upload, the client's for download."""
    settings = trial.config.traffic
    target = ("198.18.1.2" if settings.family == 4 else "2001:2:0:1::2", iperf2.PORT)
    outputs = {r["role"]: r["stdout"] for r in store.artifact(trial.id, "iperf2")}
    counted = {}
    for way, role in ((Direction.UPLOAD, "server"), (Direction.DOWNLOAD, "client")):
        lines = iperf2_csv.parse(outputs[role], role, settings.protocol)
        reports = iperf2_csv.stream_reports(lines, role)
        ours = [r for r in reports if iperf2_csv.direction_of(r, target) is way]
        if ours:
            counted[way] = sum(r.total.bytes for r in ours)
    return counted


def check_trial(store: Store, trial: TrialRecord) -> None:
    """What every iperf2 trial must show, and its bytes against the lab's counters."""
    metrics, config = trial.metrics, trial.config
    assert trial.resolved.to_dict()["stream_mode"] == "single"
    assert metrics["generator_processes"] == 1
    assert metrics["proc.iperf2-client:5001"] > 0 and "proc.iperf2-server:5001" in metrics
    assert "retransmits" not in metrics  # 2.1.8's CSV has none: not measured
    assert metrics["goodput_bps"] == pytest.approx(
        metrics.get("upload_bps", 0.0) + metrics.get("download_bps", 0.0)
    )
    intervals = store.artifact(trial.id, "intervals")
    assert len(intervals) == config.traffic.duration and all(v > 0 for v in intervals)
    records = store.artifact(trial.id, "iperf2")
    assert [r["role"] for r in records] == ["client", "server"]
    for record in records:  # exit 0, and no error output but iperf2's harmless warnings
        assert record["returncode"] == 0
        lines = [line.strip() for line in record["stderr"].splitlines() if line.strip()]
        protocol = config.traffic.protocol
        assert all(iperf2.harmless(record["role"], line, protocol) for line in lines), lines
    for way, count in received(store, trial).items():
        assert count > 0
        tunnel_end, sender = RECEIVING[way]
        if config.tunnel.kind.value == "wireguard":
            assert metrics[f"tunnel.{tunnel_end}.rx_bytes"] >= count
        else:
            assert metrics[f"qdisc.{sender}.wan.sent_bytes"] >= count


def test_tcp_upload_one_and_four_streams(tmp_path):
    store, trials = run_plan(tmp_path, "upload", "", '"traffic.streams" = [1, 4]')
    assert [(t.config.tunnel.kind, t.config.traffic.streams) for t in trials] == [
        ("none", 1), ("wireguard", 1), ("none", 4), ("wireguard", 4),
    ]  # fmt: skip
    for trial in trials:
        check_trial(store, trial)
        assert "download_bps" not in trial.metrics
        floor = 1e9 if trial.config.tunnel.kind == "none" else 100e6
        assert trial.metrics["upload_bps"] > floor
    none1, wg1, none4, wg4 = trials
    assert wg1.metrics["goodput_bps"] < none1.metrics["goodput_bps"]
    assert wg4.metrics["goodput_bps"] < none4.metrics["goodput_bps"]
    assert wg1.resolved.to_dict()["tunnel_implementation"] == "wireguard-go"
    env = store.run("latest").environment
    assert (env.versions or {})["iperf2"].startswith("iperf version 2.")


def test_udp_rate_per_stream_loss_and_jitter_from_the_receiver(tmp_path):
    udp = 'protocol = "udp"\nudp_rate = "100mbit"\nstreams = 2'
    store, trials = run_plan(tmp_path, "udp", udp, "")
    for trial in trials:
        check_trial(store, trial)
        m = trial.metrics
        assert 0 <= m["udp.lost_pct"] < 100 and m["udp.jitter_ms"] >= 0
        if trial.config.tunnel.kind == "none":
            assert m["upload_bps"] == pytest.approx(200e6, rel=0.05)  # 2 streams of 100 Mbit/s
            assert m["udp.lost_pct"] < 5
        else:
            # wireguard-go drops UDP at this rate here (11-33% seen), or holds the sender
            # back (its TUN queue blocks the socket: 20% under the rate, 0.4% lost, seen),
            # and then iperf2 catches up: one second may carry more than the rate (215
            # Mbit/s seen). Over the whole 2 s test the client sent no more than 2 x 100
            # Mbit/s, nothing arrived that it did not send, and the receiver's loss (by
            # sequence gaps) is what the client sent and the server did not get (by
            # bytes), to 2 points: two instruments, one figure.
            assert m["upload_bps"] > 0.3 * 200e6
            (arrived,) = received(store, trial).values()
            sent_bytes = sent(store, trial)
            assert 0 < arrived <= sent_bytes <= 2 * 1.05 * 200e6 / 8
            assert abs(100 * (1 - arrived / sent_bytes) - whole_test_loss(store, trial)) <= 2
        # 2 s of traffic (1 s warm-up + 1 s measured), only the last second counted: the
        # whole test holds it, and at a steady rate (no tunnel) twice it; wireguard-go's
        # loss varies from second to second.
        (count,) = received(store, trial).values()
        assert m["upload_bps"] <= 8 * count <= 2 * 1.05 * 200e6
        if trial.config.tunnel.kind == "none":
            assert 8 * count == pytest.approx(2 * m["upload_bps"], rel=0.1)
        argv = store.artifact(trial.id, "iperf2")[0]["argv"]
        length = 1368 if trial.config.tunnel.kind == "wireguard" else 1448
        assert argv[argv.index("-l") + 1] == str(length)  # no fragmentation in the tunnel


def test_download_and_full_duplex(tmp_path):
    store, trials = run_plan(
        tmp_path, "directions", "", '"traffic.direction" = ["download", "bidir"]'
    )
    for trial in trials:
        check_trial(store, trial)
        m = trial.metrics
        assert m["download_bps"] > 100e6
        if trial.config.traffic.direction == "bidir":
            assert m["upload_bps"] > 100e6
        else:
            assert "upload_bps" not in m
