"""TCP counters over the measured window: metrics from real captured counters, and the
reader that opens a namespace's counters through one of its processes."""

import os
import subprocess

import pytest

from tests.unit.probe_fixtures import text
from tunnelbench.probes import tcp
from tunnelbench.probes.load import netns_inode


def readings(phase: str) -> dict[str, str]:
    return {role: text(f"tcp-tbf-{role}-{phase}.txt") for role in ("client", "server")}


def test_window_metrics_sum_both_endpoints_retransmits():
    m = tcp.window_metrics(readings("before"), readings("after"))
    assert m["tcp.window.client.retrans_segs"] == 10234
    assert m["tcp.window.client.out_segs"] == 13920
    assert m["tcp.window.server.in_segs"] == 4558
    server = m["tcp.window.server.retrans_segs"]
    assert m["tcp.window.retrans_segs"] == 10234 + server
    # Every counter tcp.py knows, per role, under the window's prefix.
    for role in ("client", "server"):
        for name in (*tcp.SINGLE, "reorder"):
            assert f"tcp.window.{role}.{name}" in m
    assert not any(k.startswith("tcp.client.") for k in m)


def test_no_total_from_half_a_window():
    start = readings("before")
    end = readings("after")
    del end["server"]
    assert tcp.window_metrics(start, end) == {}
    assert tcp.window_metrics({}, {}) == {}


def test_no_total_without_retrans_segs():
    def drop(raw: str) -> str:
        lines = raw.splitlines()
        for i in range(0, len(lines), 2):
            if lines[i].startswith("Tcp:"):
                header, values = lines[i].split(), lines[i + 1].split()
                k = header.index("RetransSegs")
                lines[i] = " ".join(header[:k] + header[k + 1 :])
                lines[i + 1] = " ".join(values[:k] + values[k + 1 :])
        return "\n".join(lines) + "\n"

    start, end = readings("before"), readings("after")
    start["server"], end["server"] = drop(start["server"]), drop(end["server"])
    m = tcp.window_metrics(start, end)
    assert "tcp.window.retrans_segs" not in m
    assert "tcp.window.server.retrans_segs" not in m
    assert m["tcp.window.client.retrans_segs"] == 10234


def test_kept_readings_hold_the_counters_used():
    kept = tcp.kept_readings(readings("after"))
    assert kept["client"]["Tcp.RetransSegs"] == 10234
    assert set(kept["client"]) == set(kept["server"])
    assert "Tcp.MaxConn" not in kept["client"]


def own_inode() -> int:
    inode = netns_inode(os.readlink("/proc/self/ns/net"))
    assert inode is not None
    return inode


def test_counters_stay_readable_after_the_process_exits():
    child = subprocess.Popen(["sleep", "30"])
    counters = tcp.WindowCounters({"here": own_inode(), "elsewhere": 1})
    try:
        counters.open_from([999_999_999, child.pid])  # a PID that does not exist is passed
        assert counters.missing == ["elsewhere"]
    finally:
        child.kill()
        child.wait()
    try:
        first = tcp.parse_counters(counters.read()["here"])
        second = tcp.parse_counters(counters.read()["here"])
    finally:
        counters.close()
    assert ("Tcp", "RetransSegs") in first and ("TcpExt", "TCPTimeouts") in first
    assert second[("Tcp", "OutSegs")] >= first[("Tcp", "OutSegs")]
    assert counters.read() == {}


@pytest.mark.skipif(not os.path.exists("/proc/self/net/snmp"), reason="no /proc/net")
def test_a_reading_matches_proc_net():
    counters = tcp.WindowCounters({"here": own_inode()})
    counters.open_from([os.getpid()])
    try:
        mine = tcp.parse_counters(counters.read()["here"])
    finally:
        counters.close()
    with open("/proc/self/net/snmp") as f:
        direct = tcp.parse_counters(f.read())
    assert mine[("Tcp", "MaxConn")] == direct[("Tcp", "MaxConn")]
    assert set(direct) <= set(mine)
