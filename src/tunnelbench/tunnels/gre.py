"""GRE (kernel): IP in GRE (``gre``, L3) and Ethernet in GRE (``gretap``, L2), unencrypted.

gretap is the kernel's closest kin of MikroTik's EoIP (which is GRE carrying Ethernet
with a proprietary key field). Neither uses a key, checksum or sequence number: each lab
namespace holds one tunnel per kind, so nothing needs demultiplexing, and the GRE header
is its minimal 4 bytes. GRE's protocol field names the inner packet, so both carry IPv4
and IPv6. These are the kinds users wrap in IPsec (``tunnel.protection = "ipsec"``): ESP
protects their GRE packets (IP protocol 47), see :mod:`tunnelbench.tunnels.kernel_link`.
"""

from tunnelbench.kinds import TunnelKind
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.tunnels.kernel_link import KernelLinkTunnel


class Gre(KernelLinkTunnel):
    """Outer IPv4 20 + GRE 4 = 24 bytes: MTU 1476 on a 1500-byte underlay."""

    kind = TunnelKind.GRE
    link_type = "gre"
    kernel_module = "ip_gre"
    display = "GRE"
    encapsulation = Encapsulation.GRE
    device_prefix = "gre"
    protectable = True
    protocol = "gre"


class GreTap(KernelLinkTunnel):
    """Outer IPv4 20 + GRE 4 + inner Ethernet 14 = 38 bytes: MTU 1462 on 1500."""

    kind = TunnelKind.GRETAP
    link_type = "gretap"
    kernel_module = "ip_gre"
    display = "gretap"
    encapsulation = Encapsulation.GRETAP
    device_prefix = "gtap"
    layer2 = True
    protectable = True
    protocol = "gre"
