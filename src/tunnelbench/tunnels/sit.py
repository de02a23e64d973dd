"""SIT (kernel): IPv6 in IPv4 (6in4, RFC 4213, IP protocol 41), unencrypted.

The kernel's ``ipip`` link cannot carry IPv6; ``sit`` is its IPv6 counterpart over the
same IPv4 underlay, with the same 20-byte outer header (the wire model's ``ipip`` shape:
the two differ only in the protocol number). It carries IPv6 alone in the lab: its
device gets no IPv4 address or route, and ``traffic.family = 4`` is refused before any
lab is built.
"""

from typing import ClassVar

from tunnelbench.kinds import TunnelKind
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.tunnels.kernel_link import KernelLinkTunnel


class Sit(KernelLinkTunnel):
    """Outer IPv4 20 bytes: MTU 1480 on a 1500-byte underlay."""

    kind = TunnelKind.SIT
    link_type = "sit"
    kernel_module = "sit"
    display = "SIT (6in4)"
    encapsulation = Encapsulation.IPIP
    device_prefix = "sit"
    families: ClassVar[tuple[int, ...]] = (6,)
