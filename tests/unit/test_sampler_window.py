"""The CPU sampler's window (probes/sampler): its samples are taken at the traffic
window's edges even when the process scan is slow, as it is in a VM guest under TCG
(0.3 s a scan), and a generator can wait for the closing sample before it stops the
traffic. The sampler, /proc and the scans are the real ones; the scan is slowed by a
sleep around the real one, the guest's cost without the guest."""

import os
import threading
import time
from pathlib import Path

import pytest

from tunnelbench.probes import cpu, load, speed
from tunnelbench.probes.sampler import Sampler

SLOW_SCAN_S = 0.3


@pytest.fixture
def slow_scan_and_read_times(monkeypatch):
    """Every process scan takes 0.3 s longer; every CPU snapshot's read time is kept."""
    real_scan, real_read = load.scan, cpu.read_snapshot
    reads: list[float] = []

    def scan(*args, **kwargs):
        time.sleep(SLOW_SCAN_S)
        return real_scan(*args, **kwargs)

    def read_snapshot():
        reads.append(time.monotonic())
        return real_read()

    monkeypatch.setattr(load, "scan", scan)
    monkeypatch.setattr(cpu, "read_snapshot", read_snapshot)
    return reads


def test_a_slow_scan_does_not_move_the_cpu_samples_off_the_windows_edges(
    slow_scan_and_read_times,
):
    reads = slow_scan_and_read_times
    sampler = Sampler(hz=10, speed_every=0)
    sampler.lab({"client": 1}, tcp_roles=())  # a namespace: the edges scan processes
    sampler.start()
    begin = time.monotonic() + 0.1
    sampler.watch({}, begin, begin + 1.0)
    assert sampler.wait_closed(3.0)
    result = sampler.result()
    assert result is not None and result.load_scan_ms is not None
    # Taken when read: the first at the window's start, the last at its end, the scans
    # after each (before the fix both came 0.3 s late, stamped as if on time).
    assert reads[0] - begin < 0.1, reads[0] - begin
    assert reads[-1] - (begin + 1.0) < 0.1, reads[-1] - begin
    assert abs(result.window_s - (reads[-1] - reads[0])) < 0.01
    assert result.open_lag_ms is not None and 0 <= result.open_lag_ms < 100
    assert result.close_lag_ms is not None and 0 <= result.close_lag_ms < 100
    assert abs(result.close_lag_ms / 1000 - (reads[-1] - begin - 1.0)) < 0.01


def test_the_window_closes_once_its_closing_sample_and_scan_are_taken(slow_scan_and_read_times):
    sampler = Sampler(hz=10, speed_every=0)
    sampler.lab({"client": 1}, tcp_roles=())
    sampler.start()
    begin = time.monotonic()
    sampler.watch({}, begin, begin + 0.5)
    assert not sampler.wait_closed(0.4)  # the window is still open
    assert sampler.wait_closed(2.0)
    # The closing scan (0.3 s) is part of closing: what the generator waits for.
    assert time.monotonic() - (begin + 0.5) >= SLOW_SCAN_S - 0.02
    result = sampler.result()
    assert result is not None and result.samples >= 5


def test_a_sampler_stopped_before_its_window_opened_is_closed():
    sampler = Sampler(hz=10, speed_every=0)
    sampler.start()
    begin = time.monotonic() + 10
    sampler.watch({}, begin, begin + 1)
    assert not sampler.wait_closed(0.05)
    sampler.stop()
    assert sampler.wait_closed(0.5)
    assert sampler.result() is None


def _policy(tid: int) -> int:
    """A thread's scheduling policy (proc(5) stat field 41; 1 is SCHED_FIFO)."""
    text = Path(f"/proc/self/task/{tid}/stat").read_text()
    return int(text.rsplit(")", 1)[1].split()[38])


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root (CAP_SYS_NICE)")
def test_the_sampler_thread_runs_at_real_time_priority_and_says_so():
    sampler = Sampler(hz=10, speed_every=0)
    sampler.start()
    begin = time.monotonic() + 0.3
    sampler.watch({}, begin, begin + 0.3)
    time.sleep(0.1)
    tid = sampler._thread.native_id
    assert tid is not None
    assert _policy(tid) == os.SCHED_FIFO
    assert _policy(threading.get_native_id()) == os.SCHED_OTHER  # the caller's is not moved
    assert sampler.wait_closed(2.0)
    result = sampler.result()
    assert result is not None and result.realtime


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root (CAP_SYS_NICE)")
def test_the_speed_timings_run_at_normal_priority_and_the_samples_real_time(monkeypatch):
    """A busy loop at real-time priority would hold its core from the lab all at once."""
    timed, sampled = [], []
    real_read, real_snapshot = speed.read, cpu.read_snapshot

    def read(cores, loops=speed.LOOPS):
        timed.append(_policy(threading.get_native_id()))
        return real_read(cores, loops)

    def read_snapshot():
        sampled.append(_policy(threading.get_native_id()))
        return real_snapshot()

    monkeypatch.setattr(speed, "read", read)
    monkeypatch.setattr(cpu, "read_snapshot", read_snapshot)
    sampler = Sampler(hz=20, speed_every=3)
    sampler.start()
    begin = time.monotonic()
    sampler.watch({}, begin, begin + 0.6)
    assert sampler.wait_closed(3.0)
    result = sampler.result()
    assert result is not None and result.speeds
    assert timed and set(timed) == {os.SCHED_OTHER}, timed
    assert set(sampled) == {os.SCHED_FIFO}, sampled


def test_a_moved_window_drops_what_was_sampled_for_the_earlier_one(slow_scan_and_read_times):
    """An "auto" warm-up opens the window on trial and moves it when its first stretch was
    not steady: the figures are the later window's alone, and the generator's wait is for
    its closing sample, not the earlier window's."""
    reads = slow_scan_and_read_times
    sampler = Sampler(hz=10, speed_every=0)
    sampler.lab({"client": 1}, tcp_roles=())
    sampler.start()
    first = time.monotonic()
    sampler.watch({}, first, first + 0.6)
    time.sleep(0.4)  # inside the first window (its opening scan took 0.3 s of it)
    moved = time.monotonic() + 0.2
    sampler.watch({}, moved, moved + 0.5)
    assert not sampler.wait_closed(0.5)  # the first window's end is not the moved one's
    assert sampler.wait_closed(2.0)
    result = sampler.result()
    assert result is not None and result.open_lag_ms is not None
    kept = [at for at in reads if at >= moved]
    assert 0 <= result.open_lag_ms < 100, result.open_lag_ms
    assert result.samples == len(kept) and 5 <= result.samples <= 7, (result.samples, kept)
    assert abs(result.window_s - (kept[-1] - kept[0])) < 0.01
    assert result.close_lag_ms is not None and 0 <= result.close_lag_ms < 100


def test_a_window_moved_after_the_earlier_one_closed_is_sampled_again():
    sampler = Sampler(hz=10, speed_every=0)
    sampler.start()
    first = time.monotonic()
    sampler.watch({}, first, first + 0.2)
    assert sampler.wait_closed(1.0)
    moved = time.monotonic() + 0.1
    sampler.watch({}, moved, moved + 0.3)
    assert not sampler.wait_closed(0.05)
    assert sampler.wait_closed(1.0)
    result = sampler.result()
    assert result is not None and result.open_lag_ms is not None
    assert 0 <= result.open_lag_ms < 100 and abs(result.window_s - 0.3) < 0.05
