"""CPU inside and outside the lab, from two real /proc scans (tests/fixtures/proc/
load-scan.json, captured by capture_load.py in that folder: a busy loop in a namespace
standing in for the lab, a niced busy loop, a shell loop of short processes and a process
named ``odd) (name`` outside it, on a machine another user's process kept busy)."""

import json
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tunnelbench.probes import load
from tunnelbench.probes.process import TICKS_PER_SECOND

SCAN: dict[str, Any] = json.loads((FIXTURES / "proc" / "load-scan.json").read_text())
PIDS: dict[str, int] = SCAN["pids"]


def scan(which: str) -> load.Scan:
    return load.from_raw({int(pid): (s, link) for pid, (s, link) in SCAN[which].items()})


BEFORE, AFTER = scan("before"), scan("after")


def test_parse_stat_of_a_name_with_parentheses_and_spaces():
    stat, _ = SCAN["after"][str(PIDS["outside_odd_name"])]
    times = load.parse_stat(stat)
    assert times.comm == "odd) (name"
    assert times.ppid == SCAN["tunnelbench_pid"] and not times.kernel_thread


def test_kernel_threads_are_left_out():
    kthreadd, link = SCAN["after"]["2"]
    assert load.parse_stat(kthreadd).kernel_thread
    assert link is not None  # a kernel thread has a namespace: the flag tells it apart
    assert 2 not in AFTER
    kernel = [pid for pid, (s, _) in SCAN["after"].items() if load.parse_stat(s).kernel_thread]
    assert len(kernel) == len(SCAN["after"]) - len(AFTER) > 40


def test_netns_inode_of_the_link():
    assert load.netns_inode("net:[4026531840]") == 4026531840
    assert load.netns_inode("mnt:[4026531840]") is None
    assert AFTER[PIDS["lab_busy"]].netns == SCAN["lab_inode"]


def test_used_ticks_of_processes_alive_through_the_window():
    used = load.used_ticks(BEFORE, AFTER)
    for role, pid in PIDS.items():
        b, a = BEFORE[pid].times, AFTER[pid].times
        assert used[pid] == a.own + a.reaped - b.own - b.reaped, role
    assert used[PIDS["lab_busy"]] == 93  # of 100 ticks in 1.004 s: most of a core
    assert used[PIDS["outside_odd_name"]] == 0  # asleep


def test_a_shell_loop_counts_through_the_children_it_reaped():
    pid = PIDS["outside_shell_loop"]
    b, a = BEFORE[pid].times, AFTER[pid].times
    assert a.own - b.own < 5  # the shell itself barely ran...
    assert a.reaped - b.reaped >= 15  # ...its short-lived /bin/true processes did


def test_split_between_the_lab_and_outside():
    got = load.measure(BEFORE, AFTER, [SCAN["lab_inode"]], SCAN["seconds"])
    scale = 100 / TICKS_PER_SECOND / SCAN["seconds"]
    used = load.used_ticks(BEFORE, AFTER)
    assert got.lab_pct == pytest.approx(used[PIDS["lab_busy"]] * scale, abs=0.01)
    outside = sum(t for pid, t in used.items() if pid != PIDS["lab_busy"])
    assert got.outside_pct == pytest.approx(outside * scale, abs=0.01)
    named = {b.pid: b.pct for b in got.top_outside}
    assert named[PIDS["outside_shell_loop"]] == pytest.approx(17.9, abs=0.05)
    assert named[PIDS["outside_busy"]] == pytest.approx(11.0, abs=0.05)  # niced: starved
    assert [b.pct for b in got.top_outside] == sorted(named.values(), reverse=True)
    assert got.processes == len(AFTER) and got.seconds == pytest.approx(1.004)


def test_the_tunnelbench_process_counts_only_its_reaped_children_as_the_labs():
    own = SCAN["tunnelbench_pid"]
    mine = load.measure(BEFORE, AFTER, [SCAN["lab_inode"]], SCAN["seconds"], own=own)
    plain = load.measure(BEFORE, AFTER, [SCAN["lab_inode"]], SCAN["seconds"])
    assert own not in {b.pid for b in mine.top_outside}
    # The capturing process only slept and reaped nothing in between.
    assert mine.lab_pct == plain.lab_pct
    assert mine.outside_pct <= plain.outside_pct


def _seen(pid: int, ppid: int, own: int, reaped: int, start: int = 1, netns: int | None = 7):
    times = load.ProcessTimes(f"p{pid}", ppid, start, own, reaped, kernel_thread=False)
    return pid, load.Seen(times, netns)


def test_processes_that_start_or_end_within_the_window():
    before = dict(
        [
            _seen(10, 1, own=100, reaped=0),  # a parent (a shell, make, tunnelbench)
            _seen(11, 10, own=30, reaped=5),  # its child: ends within the window
            _seen(12, 1, own=50, reaped=0, start=5),  # ends; its PID is reused by another
            _seen(13, 99, own=40, reaped=0),  # ends; its parent 99 is not seen
        ]
    )
    after = dict(
        [
            _seen(10, 1, own=110, reaped=0 + 30 + 5 + 20),  # reaped 11 (30+5 before, 20 in)
            _seen(12, 10, own=3, reaped=0, start=9),  # a new process on a reused PID
            _seen(14, 10, own=8, reaped=0, netns=None),  # new, exited, not yet reaped
        ]
    )
    assert load.used_ticks(before, after) == {10: 10 + 20, 12: 3, 14: 8}
    # As the tunnelbench process: only the child's 20 ticks, not its own 10.
    assert load.used_ticks(before, after, own=10)[10] == 20
    got = load.measure(before, after, [7], 1.0, own=10)
    assert got.lab_pct == pytest.approx(20 + 3)  # its reaped child and PID 12 in netns 7
    assert got.outside_pct == pytest.approx(8)  # no namespace readable: outside
    assert [b.pid for b in got.top_outside] == [14]


def test_a_process_that_exits_at_the_window_end_keeps_its_namespace():
    before = dict([_seen(20, 1, own=10, reaped=0, netns=7)])
    after = dict([_seen(20, 1, own=60, reaped=0, netns=None)])  # a zombie: no ns link
    got = load.measure(before, after, [7], 1.0)
    assert (got.lab_pct, got.outside_pct) == (50.0, 0.0)


def test_a_live_scan_of_this_machine_sees_this_process():
    import os

    found = load.scan()
    assert os.getpid() in found
    me = found[os.getpid()]
    assert me.netns is not None and not me.times.kernel_thread
    assert all(not seen.times.kernel_thread for seen in found.values())


def test_a_missing_namespace_is_a_lab_error(tmp_path):
    from tunnelbench.errors import LabError

    (tmp_path / "tb-x-client").write_text("")
    assert load.namespace_inodes({"client": "tb-x-client"}, tmp_path) == {
        "client": (tmp_path / "tb-x-client").stat().st_ino
    }
    with pytest.raises(LabError, match="cannot find the lab's namespace tb-x-server"):
        load.namespace_inodes({"server": "tb-x-server"}, tmp_path)


def test_a_grandchild_whose_parent_also_ended_is_subtracted_from_the_survivor():
    """Seen on this machine: a shell ran `timeout`, which ran a long test run; both ended
    within the window and the shell reaped the lot (the shell showed 306% of a core on 2
    cores until the test run's time before the window was subtracted from it)."""
    before = dict(
        [
            _seen(30, 1, own=5, reaped=0),  # the shell
            _seen(31, 30, own=1, reaped=0),  # timeout
            _seen(32, 31, own=900, reaped=40),  # the test run, 9 s of CPU so far
        ]
    )
    # The test run used 50 more ticks and ended; timeout reaped it (+990), used 1 more
    # tick and ended; the shell reaped timeout (+2 own +990 reaped).
    after = dict([_seen(30, 1, own=5, reaped=2 + 990)])
    assert load.used_ticks(before, after) == {30: 992 - 1 - 940}  # 50 + 1 tick
