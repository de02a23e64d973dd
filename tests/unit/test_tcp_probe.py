"""TCP counters from real `cat /proc/net/snmp /proc/net/netstat` output in a namespace."""

from tests.unit.probe_fixtures import text
from tunnelbench.probes.tcp import parse_counters, tcp_metrics


def client(phase: str) -> str:
    return text(f"tcp-tbf-client-{phase}.txt")


def without(raw: str, *names: str) -> str:
    """The same output from a kernel that lacks these TcpExt counters."""
    lines = raw.splitlines()
    for i in range(0, len(lines), 2):
        header, values = lines[i].split(), lines[i + 1].split()
        keep = [k for k, name in enumerate(header) if name not in names]
        lines[i] = " ".join(header[k] for k in keep)
        lines[i + 1] = " ".join(values[k] for k in keep)
    return "\n".join(lines) + "\n"


def test_a_fresh_namespace_starts_at_zero():
    before = parse_counters(client("before"))
    assert before[("Tcp", "OutSegs")] == 0
    assert before[("TcpExt", "TCPFastRetrans")] == 0
    assert before[("Tcp", "MaxConn")] == -1  # signed, as the kernel prints it


def test_client_metrics_of_the_lossy_tbf_trial():
    m = tcp_metrics("client", parse_counters(client("before")), parse_counters(client("after")))
    # Every counter was 0 before (a fresh namespace), so the deltas are the after values.
    assert m == {
        "tcp.client.retrans_segs": 10234,
        "tcp.client.out_segs": 13920,
        "tcp.client.in_segs": 3995,
        "tcp.client.lost_retransmit": 2069,
        "tcp.client.fast_retrans": 10045,
        "tcp.client.slow_start_retrans": 171,
        "tcp.client.timeouts": 18,
        "tcp.client.reorder": 0,  # TCPSACKReorder 0 + TCPTSReorder 0 + TCPRenoReorder 0
        "tcp.client.ofo_queue": 0,
        "tcp.client.sack_recovery": 403,
    }


def test_the_receiver_queued_out_of_order_segments():
    server_before = parse_counters(text("tcp-tbf-server-before.txt"))
    server_after = parse_counters(text("tcp-tbf-server-after.txt"))
    m = tcp_metrics("server", server_before, server_after)
    assert m["tcp.server.ofo_queue"] == 1573
    assert m["tcp.server.in_segs"] == 4558


def test_counters_the_kernel_lacks_stay_absent():
    before = parse_counters(without(client("before"), "TCPTimeouts", "TCPSACKReorder"))
    after = parse_counters(without(client("after"), "TCPTimeouts", "TCPSACKReorder"))
    m = tcp_metrics("client", before, after)
    assert "tcp.client.timeouts" not in m
    assert m["tcp.client.reorder"] == 0  # the two reorder counters still present
    assert m["tcp.client.retrans_segs"] == 10234
    none = ("TCPSACKReorder", "TCPTSReorder", "TCPRenoReorder")
    m = tcp_metrics(
        "client",
        parse_counters(without(client("before"), *none)),
        parse_counters(without(client("after"), *none)),
    )
    assert "tcp.client.reorder" not in m
