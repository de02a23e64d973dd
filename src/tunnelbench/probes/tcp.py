"""TCP counters of the traffic's endpoints (client and server), before and after.

``/proc/net`` is the reading thread's network namespace, so ``/proc/net/snmp`` and
``/proc/net/netstat`` read in the namespace (:meth:`Host.read_net`) give that
namespace's own counters: a fresh lab namespace reads all zeros (checked on this 6.18
kernel, with the host's counters in the millions). Stored as deltas,
``tcp.<role>.<name>``:

=====================  ==========================================================
name                   counter(s)
=====================  ==========================================================
``retrans_segs``       Tcp ``RetransSegs``
``out_segs``           Tcp ``OutSegs``
``in_segs``            Tcp ``InSegs``
``lost_retransmit``    TcpExt ``TCPLostRetransmit``
``fast_retrans``       TcpExt ``TCPFastRetrans``
``slow_start_retrans`` TcpExt ``TCPSlowStartRetrans``
``timeouts``           TcpExt ``TCPTimeouts``
``reorder``            TcpExt ``TCPSACKReorder`` + ``TCPTSReorder`` + ``TCPRenoReorder``
``ofo_queue``          TcpExt ``TCPOFOQueue``
``sack_recovery``      TcpExt ``TCPSackRecovery``
=====================  ==========================================================

Kernels add and rename counters; one this kernel lacks is left out of the metrics, never
stored as zero (6.18 has them all). ``reorder`` sums the reorder counters present.

These deltas span the whole trial, set-up and warm-up included. The same counters over
the *measured window* alone, ``tcp.window.<role>.<name>``, are read by the sampler as the
window opens and closes (:class:`WindowCounters`), and ``tcp.window.retrans_segs`` is
the client's and the server's ``RetransSegs`` together: the segments TCP retransmitted
in both directions (a receiver retransmits no ACKs, so in an upload or a download the
receiving end adds only its rare control-segment retransmits, and in a bidirectional
test each end's own data). Every retransmission of a data segment adds its segment count
to ``RetransSegs`` and to the socket's ``tcpi_total_retrans``, which iperf3 reports: over
the same window the two agree, and the kernel's count also holds the connections iperf3
does not count (its control connection).
"""

import os
from collections.abc import Iterable, Mapping
from typing import Any

from tunnelbench.analysis.steadiness import CWND
from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.model import metrics as metric
from tunnelbench.probes import backlog, senders
from tunnelbench.probes.load import netns_inode
from tunnelbench.probes.trial import (
    Machines,
    ProbeContext,
    ProbeKind,
    ProbeReading,
    read_each,
)
from tunnelbench.traffic.base import CLIENT, SERVER

Counter = tuple[str, str]  # (section, name), e.g. ("Tcp", "RetransSegs")

SINGLE: dict[str, Counter] = {
    "retrans_segs": ("Tcp", "RetransSegs"),
    "out_segs": ("Tcp", "OutSegs"),
    "in_segs": ("Tcp", "InSegs"),
    "lost_retransmit": ("TcpExt", "TCPLostRetransmit"),
    "fast_retrans": ("TcpExt", "TCPFastRetrans"),
    "slow_start_retrans": ("TcpExt", "TCPSlowStartRetrans"),
    "timeouts": ("TcpExt", "TCPTimeouts"),
    "ofo_queue": ("TcpExt", "TCPOFOQueue"),
    "sack_recovery": ("TcpExt", "TCPSackRecovery"),
}
REORDER: tuple[Counter, ...] = (
    ("TcpExt", "TCPSACKReorder"),
    ("TcpExt", "TCPTSReorder"),
    ("TcpExt", "TCPRenoReorder"),
)
FILES = ("snmp", "netstat")  # of /proc/net


def parse_counters(text: str) -> dict[Counter, int]:
    """Every counter of ``/proc/net/snmp`` and ``/proc/net/netstat`` (concatenated).

    Both files hold pairs of lines, ``Section: Name1 Name2 ...`` then
    ``Section: value1 value2 ...``.
    """
    counters: dict[Counter, int] = {}
    lines = [line.split() for line in text.splitlines() if line.strip()]
    for header, values in zip(lines[::2], lines[1::2], strict=False):
        section = header[0].rstrip(":")
        if values[0] != header[0] or len(header) != len(values):
            raise LabError(f"cannot read the {section} counters: header and values differ")
        for name, value in zip(header[1:], values[1:], strict=True):
            counters[(section, name)] = int(value)
    return counters


def tcp_metrics(
    role: str, before: Mapping[Counter, int], after: Mapping[Counter, int]
) -> dict[str, float]:
    """``tcp.<role>.<name>`` deltas of the counters present in both readings (``role``
    may carry a prefix: ``window.client``)."""

    def delta(counter: Counter) -> int | None:
        if counter in before and counter in after:
            return after[counter] - before[counter]
        return None

    metrics: dict[str, float] = {}
    for name, counter in SINGLE.items():
        if (value := delta(counter)) is not None:
            metrics[metric.tcp(role, name)] = value
    reorder = [d for d in map(delta, REORDER) if d is not None]
    if reorder:
        metrics[metric.tcp(role, "reorder")] = sum(reorder)
    return metrics


def window_metrics(start: Mapping[str, str], end: Mapping[str, str]) -> dict[str, float]:
    """``tcp.window.<role>.<name>`` from the readings (role -> text of both files) at the
    window's start and end, and ``tcp.window.retrans_segs``, the sum over the roles, when
    every role has ``RetransSegs`` at both ends."""
    metrics: dict[str, float] = {}
    total = 0.0
    for role in start:
        if role not in end:
            return {}  # half the window would be a silent undercount
        metrics |= tcp_metrics(
            f"window.{role}", parse_counters(start[role]), parse_counters(end[role])
        )
        if (name := metric.tcp(role, "retrans_segs", window=True)) not in metrics:
            return metrics
        total += metrics[name]
    if start:
        metrics[metric.KERNEL_RETRANSMITS.name] = total
    return metrics


def kept_readings(readings: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Role -> the counters the metrics come from, for the trial's artifacts."""
    return {role: _kept(parse_counters(text)) for role, text in readings.items()}


class WindowCounters:
    """The TCP counters of some of the lab's namespaces, read without starting a process.

    ``/proc/PID/net/`` is the network namespace of process PID, so a process known to
    live in a namespace (a load generator) opens its counters. An open file stays bound to
    its namespace after that process exits and reads the current counters again from its
    start (checked on this 6.18 kernel: a read after the process was killed showed the
    segments sent since), so each reading costs one ``pread`` per file, about 20 us.
    """

    def __init__(self, namespaces: Mapping[str, int]) -> None:
        self.namespaces = dict(namespaces)  # role -> namespace inode
        self._files: dict[str, list[int]] = {}

    @property
    def missing(self) -> list[str]:
        return [role for role in self.namespaces if role not in self._files]

    def open_from(self, pids: Iterable[int]) -> None:
        """Open the counters of every role still missing through a process in its
        namespace; a process that is gone or elsewhere is passed over."""
        wanted = {inode: role for role, inode in self.namespaces.items() if role not in self._files}
        for pid in pids:
            try:
                inode = netns_inode(os.readlink(f"/proc/{pid}/ns/net"))
                if inode in wanted:
                    self._files[wanted[inode]] = _open_counters(pid)
                    del wanted[inode]
            except OSError:
                continue

    def read(self) -> dict[str, str]:
        """Role -> both files' text now, for every role opened."""
        return {role: "".join(_pread_all(fd) for fd in fds) for role, fds in self._files.items()}

    def close(self) -> None:
        for fds in self._files.values():
            for fd in fds:
                os.close(fd)
        self._files.clear()


def _open_counters(pid: int) -> list[int]:
    """Open ``/proc/PID/net/snmp`` and ``netstat``: both or neither."""
    fds: list[int] = []
    try:
        for path in FILES:
            fds.append(os.open(f"/proc/{pid}/net/{path}", os.O_RDONLY))
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def _pread_all(fd: int) -> str:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 65536, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks).decode()


def read(host: Host) -> str:
    return host.read_net(FILES)


class TcpProbe(backlog.WatchingProbe):
    """The ends' TCP counters before and after the traffic, and their senders' windows
    read through it (:mod:`tunnelbench.probes.senders`): the warm-up's evidence
    while it runs (:meth:`queue_readings`), the window's afterwards."""

    kind = ProbeKind.TCP

    def before(self, machines: Machines, context: ProbeContext) -> None:
        self.machines = machines
        self.roles = (CLIENT, SERVER)
        self.duration = context.traffic.duration
        self.before_text = read_each(self.roles, lambda role: read(machines.host(role)))
        self.watching(senders.watch(machines, self.roles), self.duration)

    def after(self) -> ProbeReading:
        series = self.stopped()
        after_text = read_each(self.roles, lambda role: read(self.machines.host(role)))
        metrics: dict[str, float] = {}
        raw: dict[str, Any] = {"before": {}, "after": {}}
        for role in self.roles:
            before = parse_counters(self.before_text[role])
            after = parse_counters(after_text[role])
            metrics |= tcp_metrics(role, before, after)
            raw["before"][role] = _kept(before)
            raw["after"][role] = _kept(after)
        if series:
            raw[CWND] = backlog.raw(series, self.window)
            if self.window is not None:
                metrics |= senders.window_metrics(series, self.window, self.duration)
        return ProbeReading(metrics, raw)


def _kept(counters: Mapping[Counter, int]) -> dict[str, int]:
    """The counters the metrics come from (the files hold hundreds more)."""
    used = (*SINGLE.values(), *REORDER)
    return {f"{s}.{n}": counters[(s, n)] for s, n in used if (s, n) in counters}
