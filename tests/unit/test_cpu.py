"""Per-core CPU accounting and per-process tick parsing."""

import pytest

from tests.conftest import FIXTURES
from tunnelbench.probes import cpu, process


def test_parse_real_proc_stat_skips_the_aggregate_line():
    snap = cpu.parse_proc_stat((FIXTURES / "proc" / "stat-before.txt").read_text())
    assert sorted(snap) == [0, 1]
    assert snap[0] == (2534, 0, 2256, 50919, 37, 0, 721, 6)


def test_usage_between_real_snapshots():
    before = cpu.parse_proc_stat((FIXTURES / "proc" / "stat-before.txt").read_text())
    after = cpu.parse_proc_stat((FIXTURES / "proc" / "stat-after.txt").read_text())
    usage = cpu.usage(before, after)
    # cpu0: +1 system, +50 idle -> 51 ticks; cpu1: +50 idle.
    assert usage[0].system == pytest.approx(100 / 51)
    assert usage[0].idle == pytest.approx(5000 / 51)
    assert usage[1].busy == pytest.approx(0.0)


def test_usage_hand_computed():
    # user nice system idle iowait irq softirq steal
    before: cpu.Snapshot = {0: (100, 0, 100, 100, 0, 0, 100, 0), 1: (0, 0, 0, 0, 0, 0, 0, 0)}
    after: cpu.Snapshot = {0: (130, 10, 120, 120, 10, 0, 110, 0), 1: (0, 0, 0, 0, 0, 0, 0, 0)}
    core0, core1 = cpu.usage(before, after)
    # deltas: user 30 + nice 10, system 20, idle 20 + iowait 10, softirq 10 -> total 100
    assert (core0.user, core0.system, core0.idle, core0.softirq) == (40.0, 20.0, 30.0, 10.0)
    assert core0.busy == 70.0
    assert core1.idle == 100.0  # no ticks at all counts as idle, not as busy
    assert cpu.busiest([core0, core1]) is core0


def test_process_ticks_with_a_hostile_command_name():
    line = "4242 (evil ) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 12 0 0 20 0 3 0 999 0 0"
    assert process.parse_cpu_ticks(line) == (37, 12)


def test_percent_of_core():
    ticks = process.TICKS_PER_SECOND * 3  # three CPU-seconds
    assert process.percent_of_core(ticks, 2.0) == pytest.approx(150.0)
    assert process.percent_of_core(10, 0.0) == 0.0
