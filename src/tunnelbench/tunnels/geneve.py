"""GENEVE (kernel): Ethernet in UDP with a VXLAN-sized header and room for options
(RFC 8926), unencrypted; an L2 tunnel.

Unlike VXLAN, a geneve link takes no ``local`` or ``dev`` (``ip link help geneve`` offers
neither): it listens on every address of its namespace and reaches the remote end by the
namespace's routes, which in the lab lead over the WAN link. No options are
sent, so the header is its minimal 8 bytes.
"""

from tunnelbench.kinds import TunnelKind
from tunnelbench.lab.topology import Underlay
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.system.probing import PROBE_REMOTE
from tunnelbench.tunnels.base import TunnelSpec
from tunnelbench.tunnels.kernel_link import KernelLinkTunnel
from tunnelbench.tunnels.site import Site

VNI = 42
PORT = 6081  # IANA's port for GENEVE, the kernel's default


class Geneve(KernelLinkTunnel):
    """Outer IPv4 20 + UDP 8 + GENEVE 8 + inner Ethernet 14 = 50 bytes: MTU 1450 on 1500."""

    kind = TunnelKind.GENEVE
    link_type = "geneve"
    kernel_module = "geneve"
    display = "Geneve"
    encapsulation = Encapsulation.GENEVE
    probe_args = ("id", "1", "remote", PROBE_REMOTE)
    device_prefix = "gnv"
    layer2 = True

    def link_options(
        self, site: Site, role: str, spec: TunnelSpec, underlay: Underlay | None = None
    ) -> list[str]:
        remote = (underlay or site.wan_underlay(role)).remote
        return ["id", str(VNI), "remote", remote, "dstport", str(PORT)]
