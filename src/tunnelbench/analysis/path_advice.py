"""Advice from what the path did to the packets: reordering."""

from tunnelbench.analysis.diagnosis import (
    Bound,
)
from tunnelbench.analysis.suggestion import (
    Advice,
    Context,
)


def reordered_packets(c: Context) -> Advice | None:
    """Packets reordered on the way (the ``reordering`` finding): TCP takes a late
    packet for a lost one. Not where the plan asked for it (``lab.wan.reorder``)."""
    finding = c.finding(Bound.REORDERING)
    if finding is None or c.subject.config.lab.wan.reorder:
        return None
    return Advice(
        None,
        "keep each flow's packets in order through the tunnel: processing one flow's"
        " packets on several cores at once (per-packet parallel or asynchronous crypto,"
        " as ESP's can be, several daemon threads) or sending them over several paths reorders"
        " them, and TCP takes a late segment for a lost one. Judge such a tunnel with TCP"
        " traffic: a UDP test counts a reordered datagram as delivered and hides the cost",
        finding.summary,
    )
