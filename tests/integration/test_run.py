"""`tunnelbench run` end to end: real labs, real tunnels, real iperf3, real SQLite."""

import json
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.store import Store

SHORT = ["--runs", "1", "--duration", "1", "--warmup", "0", "-q"]


def stored(db) -> tuple[Store, list]:
    store = Store(db)
    run = store.run("latest")
    return store, store.trials(run.id)


def _received_bytes(store: Store, trial) -> int:
    docs = store.artifact(trial.id, "iperf3")
    return sum(
        int(doc["end"][k]["bytes"])
        for doc in docs
        for k in doc["end"]
        if k.startswith("sum_received")
    )


@pytest.mark.parametrize("topology", ["road-warrior", "site-to-site"])
def test_every_tunnel_kind_runs_and_traffic_crosses_the_tunnel(tmp_path, topology):
    db = tmp_path / "r.db"
    done = tunnelbench("run", "--topology", topology, "--streams", "1", *SHORT, "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"stored as run 1 in {db}" in done.stdout
    store, trials = stored(db)
    assert [t.config.tunnel.kind for t in trials] == ["none", "wireguard", "vxlan"]
    for trial in trials:
        assert trial.status == "ok", trial.error
        assert trial.metrics["goodput_bps"] > 50e6
        # Probes ran over the measured window at >= 5 Hz and cost little.
        assert trial.metrics["sampler.samples"] >= 5 * trial.metrics["sampler.window_s"]
        assert trial.metrics["sampler.cpu_pct"] < 5
        assert "cpu0.idle" in trial.metrics
        assert trial.metrics["proc.iperf3-client:5201"] > 0
    wireguard, vxlan = trials[1], trials[2]
    assert wireguard.resolved.to_dict()["tunnel_implementation"] == "wireguard-go"
    assert wireguard.resolved.to_dict()["tunnel_mtu"] == 1420
    assert vxlan.resolved.to_dict()["tunnel_mtu"] == 1450
    assert any(k.startswith("proc.wireguard-go@") and v > 5 for k, v in wireguard.metrics.items())
    receiver_end = "gw" if topology == "road-warrior" else "gwb"
    for trial in (wireguard, vxlan):
        # The receiving tunnel end decapsulated at least every byte iperf3 counted.
        assert trial.metrics[f"tunnel.{receiver_end}.rx_bytes"] >= _received_bytes(store, trial)
    env = store.run("latest").environment
    assert (env.cores or 0) >= 1 and env.kernel
    assert "iperf 3" in (env.versions or {})["iperf3"]
    assert "wireguard-go" in (env.versions or {})["wireguard/wireguard-go"]


def test_report_json_has_medians_runs_and_percent_of_baseline(tmp_path):
    db = tmp_path / "r.db"
    done = tunnelbench(
        "run", "--tunnels", "wireguard", "--streams", "2", "--runs", "2", "--duration", "1",
        "--warmup", "0", "-q", "--db", str(db),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = tunnelbench("report", "latest", "--format", "json", "--db", str(db))
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    base, wg = doc["configurations"]
    assert base["label"] == "none" and wg["label"] == "wireguard (wireguard-go)"
    assert len(wg["runs"]) == 2 and wg["goodput_mbit"]["n"] == 2
    medians = sorted(r["goodput_mbit"] for r in wg["runs"])
    assert wg["goodput_mbit"]["median"] == pytest.approx(sum(medians) / 2)
    assert wg["pct_of_baseline"] == pytest.approx(
        100 * wg["goodput_mbit"]["median"] / base["goodput_mbit"]["median"]
    )
    # Two streams on single-threaded iperf3 3.12 run as two processes, and say so.
    assert all(r["resolved"]["stream_mode"] == "processes" for r in wg["runs"])
    assert all(r["metrics"]["generator_processes"] == 2 for r in wg["runs"])
    # One receiver-side interval per measured second, summed over both processes.
    assert all(len(r["intervals_mbit"]) == 1 for r in wg["runs"])
    assert all(r["intervals_mbit"][0] > 0 for r in wg["runs"])
    table = tunnelbench("report", "--db", str(db))
    words = " ".join(table.stdout.split())  # a folded cell's words, on one line
    assert "base" in table.stdout and "wireguard (wireguard-go)" in words


@pytest.mark.parametrize("direction", ["download", "bidir"])
def test_directions(tmp_path, direction):
    db = tmp_path / "r.db"
    done = tunnelbench(
        "run", "--tunnels", "vxlan", "--streams", "1", "--direction", direction,
        "--stream-mode", "single", *SHORT, "--db", str(db),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _, trials = stored(db)
    for trial in trials:
        assert trial.metrics["download_bps"] > 50e6
        assert ("upload_bps" in trial.metrics) == (direction == "bidir")
        assert trial.metrics["goodput_bps"] == pytest.approx(
            trial.metrics["download_bps"] + trial.metrics.get("upload_bps", 0.0)
        )


def test_ipv6_traffic_site_to_site(tmp_path):
    db = tmp_path / "r.db"
    done = tunnelbench(
        "run", "--tunnels", "wireguard", "--family", "6", "--topology", "site-to-site",
        "--streams", "1", *SHORT, "--db", str(db),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    store, trials = stored(db)
    doc = store.artifact(trials[1].id, "iperf3")[0]
    assert doc["start"]["connected"][0]["remote_host"] == "2001:2:0:2::2"
    assert trials[1].metrics["goodput_bps"] > 50e6


def test_shaped_wan_limits_goodput_to_the_rate(tmp_path):
    db = tmp_path / "r.db"
    done = tunnelbench(
        "run", "--tunnels", "none", "--streams", "1", "--rate", "100mbit", "--runs", "1",
        "--duration", "2", "--warmup", "1", "-q", "--db", str(db),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _, (trial,) = stored(db)
    # tbf counts IP + Ethernet header: 1448 / 1514 x 100 Mbit/s = 95.6 Mbit/s at most.
    assert 85e6 < trial.metrics["goodput_bps"] < 96.5e6


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_keeps_finished_trials_and_tears_down(tmp_path, sig):
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunnelbench", "run", "--tunnels", "wireguard", "--streams", "1",
         "--runs", "5", "--duration", "2", "--warmup", "0", "-q", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    finished = 0
    while time.monotonic() < deadline and finished < 1:
        time.sleep(0.2)
        if db.exists():
            with sqlite3.connect(db) as conn:
                try:
                    finished = conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
                except sqlite3.OperationalError:
                    finished = 0
    time.sleep(0.7)  # into the next trial: its lab and daemons are up
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted; the lab was torn down" in err
    assert "Traceback" not in err
    store, trials = stored(db)
    assert store.run("latest").status == "interrupted"
    assert len(trials) >= 1 and all(t.status == "ok" for t in trials)
