"""TCP counters of the traffic's endpoints (client and server), before and after.

``/proc/net`` is the reading process's network namespace, so ``ip netns exec NS cat
/proc/net/snmp /proc/net/netstat`` gives that namespace's own counters: a fresh lab
namespace reads all zeros (checked on this 6.18 kernel, with the host's counters in the
millions), and one command per namespace reads both files. Stored as deltas,
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
"""

from collections.abc import Mapping

from tunnelbench.command import in_netns, run
from tunnelbench.errors import LabError
from tunnelbench.lab.netns import Lab
from tunnelbench.probes.trial import (
    ProbeContext,
    ProbeKind,
    ProbeReading,
    TrialProbe,
    read_each,
)

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
FILES = ("/proc/net/snmp", "/proc/net/netstat")


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
    """``tcp.<role>.<name>`` deltas of the counters present in both readings."""

    def delta(counter: Counter) -> int | None:
        if counter in before and counter in after:
            return after[counter] - before[counter]
        return None

    metrics: dict[str, float] = {}
    for name, counter in SINGLE.items():
        if (value := delta(counter)) is not None:
            metrics[f"tcp.{role}.{name}"] = value
    reorder = [d for d in map(delta, REORDER) if d is not None]
    if reorder:
        metrics[f"tcp.{role}.reorder"] = sum(reorder)
    return metrics


def read(namespace: str) -> str:
    return run(in_netns(namespace, ["cat", *FILES])).stdout


class TcpProbe(TrialProbe):
    kind = ProbeKind.TCP

    def before(self, lab: Lab, context: ProbeContext) -> None:
        self.lab = lab
        self.roles = (lab.chain.client, lab.chain.server)
        self.before_text = read_each(self.roles, lambda role: read(lab.ns(role)))

    def after(self) -> ProbeReading:
        after_text = read_each(self.roles, lambda role: read(self.lab.ns(role)))
        metrics: dict[str, float] = {}
        raw: dict[str, dict[str, dict[str, int]]] = {"before": {}, "after": {}}
        for role in self.roles:
            before = parse_counters(self.before_text[role])
            after = parse_counters(after_text[role])
            metrics |= tcp_metrics(role, before, after)
            raw["before"][role] = _kept(before)
            raw["after"][role] = _kept(after)
        return ProbeReading(metrics, raw)


def _kept(counters: Mapping[Counter, int]) -> dict[str, int]:
    """The counters the metrics come from (the files hold hundreds more)."""
    used = (*SINGLE.values(), *REORDER)
    return {f"{s}.{n}": counters[(s, n)] for s, n in used if (s, n) in counters}
