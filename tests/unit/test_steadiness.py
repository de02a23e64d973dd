"""Steady state: a trial whose queue was still filling, or whose sender was still
ramping up, across its measured window is flagged with the figures; a steady one is not."""

import json
from pathlib import Path

import pytest

from tunnelbench.analysis.noise import disturbances
from tunnelbench.analysis.steadiness import (
    goodput_thirds,
    goodput_trend,
    ramp_seconds,
    thirds,
    trend_t,
    unsteady,
)
from tunnelbench.probes.rtt import PingOutput, Reply, loaded_metrics

FIXTURES = Path(__file__).parent.parent / "fixtures" / "steadiness"


def test_thirds_are_the_means_of_the_first_and_last_third():
    assert thirds([1.0, 2.0]) is None
    assert thirds([1.0, 2.0, 6.0]) == (1.0, 6.0)
    assert thirds([1.0, 1.0, 5.0, 5.0, 9.0, 9.0, 0.0]) == (1.0, 4.5)


def test_a_big_fifo_still_filling_is_flagged_with_its_figures():
    """The captured case: a 600-packet FIFO at 30 Mbit/s and 40 ms, whose loaded RTT was
    still climbing towards its ~280 ms steady state when a 3 s trial ended."""
    metrics = {"rtt.loaded_first_ms": 98.0, "rtt.loaded_last_ms": 187.0}
    assert unsteady(metrics) == (
        "not steady: loaded RTT rose 98.0 → 187.0 ms across the window"
        " (a queue still filling; lengthen traffic.warmup)",
    )
    # It reaches the trial's flags, where the reports list disturbed trials.
    assert disturbances(metrics) == unsteady(metrics)


def test_jitter_on_a_fast_path_and_a_draining_queue_are_steady():
    assert unsteady({"rtt.loaded_first_ms": 0.05, "rtt.loaded_last_ms": 0.4}) == ()  # < 1 ms
    assert unsteady({"rtt.loaded_first_ms": 40.0, "rtt.loaded_last_ms": 46.0}) == ()  # 15%
    assert unsteady({"rtt.loaded_first_ms": 280.0, "rtt.loaded_last_ms": 120.0}) == ()  # falls
    assert unsteady({}) == ()  # stored before these metrics existed


def test_a_sender_still_ramping_up_is_flagged():
    metrics = goodput_thirds([5e6, 6e6, 7e6, 9e6, 10e6, 10e6])
    assert metrics == {"goodput.first_bps": 5.5e6, "goodput.last_bps": 10e6}
    assert unsteady(metrics) == (
        "not steady: goodput rose 82% across the window (5.5 → 10.0 Mbit/s;"
        " lengthen traffic.warmup)",
    )
    assert unsteady(goodput_thirds([9.5e6, 10e6, 10.4e6])) == ()  # +9%: noise


def test_the_ping_probe_gives_the_windows_first_and_last_third():
    # Replies every 0.1 s from t = 0 to 2.9 s, the RTT climbing 1 ms a sample.
    replies = [Reply(k + 1, k / 10, 10.0 + k) for k in range(30)]
    output = PingOutput(replies, transmitted=30)
    found = loaded_metrics(
        output, (0.0, 2.9), interval=0.1, first_sent=-0.01, stopped_at=3.5, timeout=1
    )
    # First third [0, 0.967): samples 0..9 (median 14.5); last (1.933, 2.9]: 20..29.
    assert found["rtt.loaded_first_ms"] == 14.5
    assert found["rtt.loaded_last_ms"] == 34.5
    assert unsteady(found)


def test_the_default_runs_cpu_bound_noise_is_not_called_a_transient():
    """The default run's 30 windows (real: pings and 0.1 s goodput of each window, with
    its stored metrics), taken while other work loaded this machine. Their thirds alone
    flagged 12: single streams at 5-13 Gbit/s that stepped up with the cores' load, and
    wireguard-go whose queues grew and shrank as its CPU came and went. A rise is now a
    transient only where it is a trend (the slope 3 standard errors from zero) and, for
    the goodput, where a sender could still be ramping: growing one segment a round trip
    it fills a sub-millisecond path in milliseconds, not across a third of the window.
    One window is left: wireguard-go's RTT climbing 11.7 → 26 → 49.6 ms (t = 4.1)."""
    data = json.loads((FIXTURES / "default-run-windows.json").read_text())
    thirds_only = ("rtt.loaded_first_ms", "rtt.loaded_last_ms", "goodput.first_bps")
    before, now = [], []
    for trial in data["trials"]:
        metrics = trial["metrics"]
        old = {k: v for k, v in metrics.items() if k in (*thirds_only, "goodput.last_bps")}
        if unsteady(old):
            before.append(trial["seq"])
        found = dict(metrics) | goodput_trend(trial["fine_bps"])
        t = trend_t([(at, ms) for at, ms in trial["pings"]])
        assert t is not None
        found["rtt.loaded_trend_t"] = t
        if unsteady(found):
            now.append(trial["seq"])
    assert len(data["trials"]) == 30
    assert len(before) == 12
    assert now == [21]


def test_a_long_paths_sender_can_still_be_ramping():
    """90 Mbit/s at 40 ms: a window grown one segment a round trip fills it in ~12 s,
    so a goodput that rises significantly across the window is flagged; the same rise
    at a 0.05 ms round trip (filled in microseconds) is not."""
    metrics = {
        "goodput_bps": 9e7, "goodput.window_s": 3.0, "goodput.first_bps": 7e7,
        "goodput.last_bps": 1e8, "goodput.trend_t": 6.0,
    }  # fmt: skip
    assert ramp_seconds(metrics | {"rtt.idle_ms": 40.0}) == pytest.approx(12.4, abs=0.1)
    assert unsteady(metrics | {"rtt.idle_ms": 40.0})
    assert unsteady(metrics | {"rtt.idle_ms": 0.05}) == ()
    assert unsteady(metrics | {"rtt.idle_ms": 40.0, "goodput.trend_t": 1.5}) == ()
