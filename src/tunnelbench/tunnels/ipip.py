"""IPIP (kernel): IPv4 in IPv4 (RFC 2003), unencrypted; the smallest encapsulation.

An ``ipip`` link carries IPv4 only: its modes are ``ipip``, ``mplsip`` and ``any``
(IPv4 and MPLS), never IPv6. IPv6 over an IPv4 underlay is a different device, ``sit``
(6in4, IP protocol 41), and IPv6 over IPv6 is ``ip6tnl``, whose outer header would be
IPv6 (40 bytes, + 8 for its encapsulation limit option). Rather than pass another device
off as ipip, this kind carries IPv4 alone: its device gets no IPv6 address or route, and
a configuration with ``traffic.family = 6`` is refused before any lab is built (see
:mod:`tunnelbench.bench.skips`).
"""

from typing import ClassVar

from tunnelbench.kinds import TunnelKind
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.tunnels.kernel_link import KernelLinkTunnel


class Ipip(KernelLinkTunnel):
    """Outer IPv4 20 bytes: MTU 1480 on a 1500-byte underlay."""

    kind = TunnelKind.IPIP
    link_type = "ipip"
    kernel_module = "ipip"
    display = "IPIP"
    encapsulation = Encapsulation.IPIP
    device_prefix = "ipip"
    families: ClassVar[tuple[int, ...]] = (4,)
