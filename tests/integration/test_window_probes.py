"""The measured window's own probes, against a second instrument each.

- Retransmits: the kernel's count over the window (RetransSegs of the client's and the
  server's namespaces, ``tcp.window.retrans_segs``) against iperf3's own count over its
  window, on a link where loss is certain (100 Mbit/s tbf, 5-packet FIFO), upload,
  download and bidir. Every retransmission adds to both RetransSegs and the socket's
  ``tcpi_total_retrans`` that iperf3 reports; the two windows differ by iperf3's start-up
  (20-50 ms measured here: the sampler's window opens when the client is started, iperf3's
  once it connected), so they agree within :data:`RETRANS_TOLERANCE` (0.0-1.3% measured
  in 7 lossy trials of 10,000-19,000 retransmits).
- Outside load: a niced busy loop outside the lab is measured by this test itself from
  its ``/proc/PID/stat`` over the window the trial recorded, and must show up as outside
  load with that figure; the lab's load must match the sampler's per-process figures.
"""

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.store import Store
from tunnelbench.probes.process import TICKS_PER_SECOND, read_cpu_ticks
from tunnelbench.traffic.iperf3 import AUTO_TAIL_S

RETRANS_TOLERANCE = 0.05  # relative; plus RETRANS_SLACK segments
RETRANS_SLACK = 20

LOSSY = """
name = "window-retransmits"
repetitions = 1
[base.lab.wan]
rate = "100mbit"
queue_limit = 5
[base.traffic]
duration = 2
warmup = 1
stream_mode = "single"
[matrix]
"traffic.direction" = ["upload", "download", "bidir"]
"""


def run_plan(tmp_path: Path, plan: str) -> Store:
    path = tmp_path / "plan.toml"
    path.write_text(plan)
    db = tmp_path / "r.db"
    done = tunnelbench("run", str(path), "-q", "--no-reports", "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    return Store(db)


def test_the_kernels_window_count_agrees_with_iperf3s(tmp_path):
    store = run_plan(tmp_path, LOSSY)
    trials = store.trials(store.run("latest").id)
    assert [t.status for t in trials] == ["ok"] * 3, [t.error for t in trials]
    seen = []
    for t in trials:
        m = t.metrics
        kernel, iperf3 = m["tcp.window.retrans_segs"], m["retransmits"]
        direction = t.config.traffic.direction.value
        seen.append((direction, kernel, iperf3))
        # Goodput counts the receivers' intervals of the window, which they timed as it.
        assert m["goodput.window_s"] == pytest.approx(t.config.traffic.duration, abs=0.05)
        assert kernel == m["tcp.window.client.retrans_segs"] + m["tcp.window.server.retrans_segs"]
        assert kernel >= iperf3 * (1 - RETRANS_TOLERANCE) - RETRANS_SLACK, seen
        assert kernel <= iperf3 * (1 + RETRANS_TOLERANCE) + RETRANS_SLACK, seen
        # The window's counts are a part of the whole trial's.
        for role in ("client", "server"):
            assert m[f"tcp.window.{role}.retrans_segs"] <= m[f"tcp.{role}.retrans_segs"]
            assert m[f"tcp.window.{role}.out_segs"] <= m[f"tcp.{role}.out_segs"]
        raw = store.artifact(t.id, "probes")["tcp_window"]
        assert set(raw["start"]) == set(raw["end"]) == {"client", "server"}
        client = raw["end"]["client"]["Tcp.RetransSegs"] - raw["start"]["client"]["Tcp.RetransSegs"]
        assert client == m["tcp.window.client.retrans_segs"]
    by_direction = {d: (k, i) for d, k, i in seen}
    assert by_direction["upload"][1] > 500  # the 5-packet queue made loss certain
    print("direction, kernel window count, iperf3's count:", seen)


class Watch:
    """This test's own reading of one process's CPU time, 50 times a second."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.readings: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            ticks = read_cpu_ticks(self.pid)
            if ticks is not None:
                self.readings.append((time.time(), sum(ticks)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def pct(self, start: float, seconds: float) -> float:
        """Percent of one core used between ``start`` and ``start + seconds`` (Unix time),
        from the readings nearest each edge."""

        def at(when: float) -> int:
            return min(self.readings, key=lambda r: abs(r[0] - when))[1]

        return 100.0 * (at(start + seconds) - at(start)) / TICKS_PER_SECOND / seconds


ONE_TRIAL = """
name = "outside-load"
repetitions = 1
[base.traffic]
duration = 2
warmup = 1
"""


def load_of(store: Store) -> tuple[dict[str, float], dict[str, Any]]:
    (trial,) = store.trials(store.run("latest").id)
    assert trial.status == "ok", trial.error
    return trial.metrics, store.artifact(trial.id, "probes")["cpu_load"]


def test_a_busy_process_outside_the_lab_is_outside_load(tmp_path):
    busy = subprocess.Popen(["nice", "-n", "19", "/usr/bin/python3", "-c", "while True: pass"])
    try:
        watch = Watch(busy.pid)
        time.sleep(0.5)
        (tmp_path / "with").mkdir()
        store = run_plan(tmp_path / "with", ONE_TRIAL)
        watch.stop()
    finally:
        os.kill(busy.pid, signal.SIGKILL)
        busy.wait()
    metrics, cpu_load = load_of(store)
    found = {b["pid"]: b["pct"] for b in cpu_load["top_outside"]}
    assert busy.pid in found, cpu_load
    mine = watch.pct(cpu_load["started_at"], cpu_load["seconds"])
    print(f"busy loop: {found[busy.pid]}% by the probe, {mine:.1f}% by this test;", cpu_load)
    assert found[busy.pid] == pytest.approx(mine, abs=6.0)
    assert metrics["load.outside_pct"] >= found[busy.pid]
    # The lab's load is its processes' (the sampler's per-process figures), not the loop.
    lab = sum(v for k, v in metrics.items() if k.startswith("proc."))
    assert metrics["load.lab_pct"] == pytest.approx(lab, abs=10.0)
    assert metrics["load.scan_ms"] < 100

    (tmp_path / "without").mkdir()
    metrics, cpu_load = load_of(run_plan(tmp_path / "without", ONE_TRIAL))
    print("without it:", metrics["load.outside_pct"], cpu_load["top_outside"])
    assert busy.pid not in {b["pid"] for b in cpu_load["top_outside"]}


CLOCK_STOPPED = """
name = "clock-stopped"
repetitions = 1
[base.lab.wan]
rate = "200mbit"
[base.traffic]
duration = 2
warmup = 1
streams = 4
stream_mode = "processes"
"""


def test_clients_stopped_by_the_clock_end_after_the_cpu_window_closed(tmp_path):
    """Four clients, each told to run 2 + 2 + 2 s, are stopped once the common window has
    passed and the sampler took its closing sample: the CPU window is the traffic's,
    opened and closed within a tick of its edges, and no client ran on to its -t."""
    store = run_plan(tmp_path, CLOCK_STOPPED)
    (trial,) = store.trials(store.run("latest").id)
    assert trial.status == "ok", trial.error
    m = trial.metrics
    assert m["generator_processes"] == 4
    assert 0 <= m["sampler.open_lag_ms"] < 100, m["sampler.open_lag_ms"]
    assert 0 <= m["sampler.close_lag_ms"] < 150, m["sampler.close_lag_ms"]
    assert m["sampler.window_s"] == pytest.approx(2.0, abs=0.15)
    docs = store.artifact(trial.id, "iperf3")
    assert len(docs) == 4
    print(
        "window, lags:", m["sampler.window_s"], m["sampler.open_lag_ms"], m["sampler.close_lag_ms"],
        "clients ran:", [d["intervals"][-1]["sum"]["end"] for d in docs],
    )  # fmt: skip
    for doc in docs:
        ran = doc["intervals"][-1]["sum"]["end"]  # seconds after its own -O warm-up
        # The window's 2 s, the tail, the wait for the closing sample, and how much
        # earlier than the last this client connected; far from its -t of 6 s.
        offset, tail = doc["tunnelbench_window"]["offset_s"], AUTO_TAIL_S
        assert ran - offset + 0.1 >= 2.0 + tail and ran - offset <= 2.0 + tail + 0.5, (ran, offset)
    # Every client's CPU was measured over the window (each ran through it).
    assert {k for k in m if k.startswith("proc.iperf3-client")} == {
        f"proc.iperf3-client:{port}" for port in range(5201, 5205)
    }
