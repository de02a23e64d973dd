"""The senders' own evidence: the congestion windows of each end's TCP sockets, read every
:data:`tunnelbench.probes.backlog.POLL_S` while the traffic runs.

A queue no qdisc shows fills as a qdisc's does: wireguard-go holds packets in its own
channels and its UDP socket, so four cubic senders through it raised the round trip from
26 to 73 ms across a 3 s window, with no retransmit, while the warm-up's pings (jittering
by tens of milliseconds) rose less than their noise over each half second. What fills
such a queue is the senders growing their windows with nothing lost: ``ss -ti`` in the
client's namespace showed two of the four streams at 3,000 segments, bound by their send
buffers, from the first second, and the other two growing from 57 and 41 segments to
3,000 over 9 s, each as far as its window let it (``unacked`` = ``cwnd``), with no
retransmission. The sum of the windows is a clean series where the round trip and the
bytes in flight are not: a bound window stays put to the segment, a growing one only
grows, and it stops growing once every sender is bound (by its send buffer or the
receiver's window) or has lost a segment (the loss cycle a steady state is).

So each end's established sockets are asked of its kernel
(:mod:`tunnelbench.system.sockdiag`, as ``ss -ti`` asks) and held as a queue
(:func:`tunnelbench.analysis.steadiness.queue_judged`): the windows' sum in segments, the
bytes written and not yet acknowledged beside it, and the namespace's loss recoveries
(:data:`RECOVERIES`, ``/proc/net/netstat``) as its drops. Windows that grow with no loss
since the traffic began are a queue still filling. Unlike a qdisc's backlog, a bulk
sender always holds a window, so this queue never settles a trial by standing: it only
says when one still fills.

Read on the machines read in this process (a lab's namespaces, a VM guest's from inside
it), as the qdiscs' backlog is; a real host's would need a process ten times a second
on the very machine measured.
"""

from collections.abc import Mapping, Sequence

from tunnelbench.analysis.steadiness import CWND, QueueSeries, queue_window
from tunnelbench.errors import LabError
from tunnelbench.model import metrics as metric
from tunnelbench.probes import backlog
from tunnelbench.probes.trial import Machines
from tunnelbench.system.sockdiag import TcpSocket, TcpSockets

#: The counters of a sender cutting its window: entering loss recovery (with SACK or
#: without) and a retransmission timeout. A tail-loss probe or a lone spurious
#: retransmission adds to ``RetransSegs`` without one (a lossless wireguard-go trial's
#: senders sent 3 probes in its first 0.5 s and retransmitted nothing), so it is not a
#: queue overflowing.
RECOVERIES = ("TCPSackRecovery", "TCPRenoRecovery", "TCPTimeouts")


def windows(sockets: Sequence[TcpSocket]) -> tuple[int, int]:
    """The sockets' congestion windows (segments) and write queues (bytes), each summed."""
    return sum(s.cwnd for s in sockets), sum(s.write_queue for s in sockets)


def parse_recoveries(text: str) -> int:
    """The loss recoveries so far, from ``/proc/net/netstat``'s ``TcpExt`` lines (its
    names line, then its values line) among other lines: :data:`RECOVERIES` summed."""
    ext = [line.split() for line in text.splitlines() if line.startswith("TcpExt:")]
    if len(ext) != 2 or len(ext[0]) != len(ext[1]):
        raise LabError("cannot read the TcpExt counters of /proc/net/netstat")
    found = [int(ext[1][ext[0].index(name)]) for name in RECOVERIES if name in ext[0]]
    if not found:
        raise LabError(f"/proc/net/netstat has none of {', '.join(RECOVERIES)}")
    return sum(found)


def reading(sockets: Sequence[TcpSocket], netstat: str) -> dict[str, int]:
    """One role's senders as :class:`tunnelbench.probes.backlog.BacklogWatch` reads a
    queue: the bytes written and not yet acknowledged, the windows' segments, the loss
    recoveries so far."""
    segments, in_flight = windows(sockets)
    return {"backlog_bytes": in_flight, "backlog_packets": segments,
            "drops": parse_recoveries(netstat)}  # fmt: skip


def watch(machines: Machines, roles: tuple[str, ...]) -> backlog.BacklogWatch | None:
    """A watch of ``roles``' senders where this process reads them; None where it reads
    none of them. Each role's kernel is asked through a socket opened once, closed when
    the watch stops."""
    hosts = [role for role in roles if machines.host(role).reads_in_process]
    if not hosts:
        return None
    opened: dict[str, TcpSockets] = {}
    try:
        for role in hosts:
            opened[role] = machines.host(role).tcp_sockets()
    except LabError:
        for found in opened.values():
            found.close()
        raise

    def read_role(role: str) -> Mapping[str, Mapping[str, int]]:
        sockets = opened[role]
        try:
            return {CWND: reading(sockets.established(), sockets.netstat())}
        except OSError as exc:
            raise LabError(f"{role}: {exc}") from None

    def close() -> None:
        for found in opened.values():
            found.close()

    queues = {f"{role}.{CWND}": (role, CWND) for role in hosts}
    return backlog.BacklogWatch(queues, read_role, what="the TCP senders' windows", on_stop=close)


def window_metrics(
    series: QueueSeries, window: tuple[float, float], duration_s: float
) -> dict[str, float]:
    """Per watched role over the measured window (:func:`queue_window`):
    ``tcp.<role>.cwnd.window_first`` and ``window_last``, the senders' windows summed
    (segments), their mean over the window's first and last third, and
    ``window_filling``, 1 when they still grew with no loss since the traffic began."""
    metrics: dict[str, float] = {}
    for name, readings in series.items():
        found = queue_window(name, readings, window, duration_s)
        if found is None:
            continue
        role = name.rpartition(".")[0]
        metrics[metric.tcp(role, f"{CWND}.window_first")] = round(found.first, 1)
        metrics[metric.tcp(role, f"{CWND}.window_last")] = round(found.last, 1)
        metrics[metric.tcp(role, f"{CWND}.window_filling")] = float(found.filling)
    return metrics
