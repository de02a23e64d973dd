"""Advice from what the path did to the packets and how large it let them be: reordering,
and a tunnel MTU below what the path carries."""

from dataclasses import replace

from tunnelbench.analysis.ceiling import TCP_HEADER, TCP_TIMESTAMPS, for_config
from tunnelbench.analysis.diagnosis import (
    Bound,
)
from tunnelbench.analysis.suggestion import (
    Advice,
    Context,
)
from tunnelbench.model.encapsulation import IP_HEADER, default_tunnel_mtu

#: A tunnel MTU is worth raising when the largest the path carries unfragmented gives
#: each TCP segment at least this much (%) more payload: every packet costs a userspace
#: tunnel about the same work whatever its size (wireguard-go at MTU 576: 1,591 Mbit/s,
#: at 1420: 2,539, +60%, CPU-bound both). 1280 against 1420 is +11%.
MTU_SEGMENT_GAIN_PCT = 10.0
#: Where the link is the limit the MTU moves only the ceiling (less header per byte): a
#: gain of the ceiling below this (%) is not worth advising (1280 against 1420 over a
#: shaped WireGuard link: +1%). The same as ``tunnelbench tune``'s default minimum gain.
MTU_CEILING_GAIN_PCT = 2.0
#: Verdicts that say the link set the figure: only the ceiling can move it.
LINK_BOUNDS = (Bound.LINK, Bound.LINK_LOSSY, Bound.ABOVE_CEILING)


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


def _payload(mtu: int, family: int) -> int:
    """A full TCP segment's payload (with timestamps) in packets of ``mtu``."""
    return mtu - IP_HEADER[family] - TCP_HEADER - TCP_TIMESTAMPS


def tunnel_mtu(c: Context) -> Advice | None:
    """A ``tunnel.mtu`` the plan set well below what the path carries unfragmented (the
    WAN's IP MTU less the kind's encapsulation, :func:`default_tunnel_mtu`; at most the
    LAN's MTU, which the inner packets cross too): smaller packets carry the same data in
    more of them, and a userspace tunnel pays per packet. Advised when a full segment
    would carry :data:`MTU_SEGMENT_GAIN_PCT` more; where the link is the limit, only
    when its ceiling would rise by :data:`MTU_CEILING_GAIN_PCT`. Not on real hosts,
    whose path MTU is not the lab's."""
    s = c.subject
    facts, mtu = s.resolved.tunnel, s.resolved.setup.mtu
    if s.config.tunnel.mtu is None or facts is None or facts.wire is None or mtu is None:
        return None  # the kind's own default fits the path
    if s.resolved.remote is not None:
        return None
    wire, lab, family = facts.wire, s.config.lab, s.config.traffic.family
    fits = default_tunnel_mtu(
        wire.encapsulation,
        lab.wan.ip_mtu,
        inner_family=family,
        outer_family=wire.outer_family,
        options=wire.options,
        protection=wire.protection,
    )
    allowed = min(fits, lab.lan_mtu)
    now, then = _payload(min(mtu, lab.lan_mtu), family), _payload(allowed, family)
    if allowed <= mtu or now <= 0 or 100.0 * (then / now - 1.0) < MTU_SEGMENT_GAIN_PCT:
        return None
    ceiling = _ceiling_change(c, allowed)
    if c.diagnosis.verdict.bound in LINK_BOUNDS and (
        ceiling is None or 100.0 * (ceiling[1] / ceiling[0] - 1.0) < MTU_CEILING_GAIN_PCT
    ):
        return None
    path = (
        f"the WAN's IP MTU {lab.wan.ip_mtu} less {lab.wan.ip_mtu - fits} bytes of"
        f" {facts.display} encapsulation"
    )
    if allowed < fits:
        path = f"the LAN's MTU {lab.lan_mtu} (below {fits}, {path})"
    suggestion = (
        f"raise tunnel.mtu to {allowed}, what the path carries unfragmented ({path}): at"
        f" {mtu} a full TCP segment carries {now:,} bytes where it could carry {then:,},"
        f" so the same data takes {then / now:.1f} times as many packets"
    )
    if facts.userspace:
        daemon = s.resolved.setup.implementation or "the tunnel's daemon"
        suggestion += f", each handled by {daemon} in userspace at about the same cost"
    if ceiling is not None:
        suggestion += (
            f"; the link's ceiling rises from {ceiling[0] / 1e6:,.1f} to"
            f" {ceiling[1] / 1e6:,.1f} Mbit/s"
        )
    return Advice(
        "tunnel.mtu",
        suggestion,
        f"the plan set tunnel.mtu = {s.config.tunnel.mtu}; {c.diagnosis.verdict.summary}",
        c.measured("tunnel.mtu", lambda v: v is None or v > mtu),
        candidates=(allowed,),
    )


def _ceiling_change(c: Context, mtu: int) -> tuple[float, float] | None:
    """The link's ceiling (bit/s) at the trial's tunnel MTU and at ``mtu``; None on a
    link without a ceiling (unshaped, UDP)."""
    s = c.subject
    before = for_config(s.config, s.resolved)
    after = for_config(s.config, replace(s.resolved, setup=replace(s.resolved.setup, mtu=mtu)))
    if before is None or after is None:
        return None
    return before.goodput_bps, after.goodput_bps
