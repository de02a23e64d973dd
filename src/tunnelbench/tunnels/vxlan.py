"""VXLAN (kernel): Ethernet in UDP, unencrypted; an L2 tunnel.

With ``tunnel.protection = "ipsec"`` its packets travel in ESP (see
:func:`tunnelbench.tunnels.esp.protect`): in tunnel mode the VXLAN runs between the ends'
ESP endpoint addresses, in transport mode between the WAN addresses with ESP protecting
their UDP.
"""

import platform
from typing import ClassVar

from tunnelbench.kinds import TunnelKind
from tunnelbench.lab.topology import Underlay
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.tunnels.base import Tunnel, TunnelHandle, TunnelSpec
from tunnelbench.tunnels.esp import underlays
from tunnelbench.tunnels.site import Site

VNI = 42
PORT = 4789


class Vxlan(Tunnel):
    kind = TunnelKind.VXLAN
    implementations: ClassVar[tuple[str, ...]] = ("kernel",)
    layer2 = True
    protectable = True
    encapsulation = Encapsulation.VXLAN  # outer IP + UDP 8 + VXLAN 8 + inner Ethernet 14
    display = "VXLAN"
    kernel_module = "vxlan"

    def link_probe(self) -> tuple[str, tuple[str, ...]]:
        return "vxlan", ("id", "1", "dstport", "4789")

    def version(self, implementation: str) -> str:
        return f"linux {platform.release()}"

    def setup_commands(
        self, site: Site, role: str, device: str, mtu: int, underlay: Underlay | None = None
    ) -> list[str]:
        underlay = underlay or site.wan_underlay(role)
        bind = ["dev", underlay.device] if underlay.device is not None else []
        return [
            "link", "add", device, "mtu", str(mtu), "type", "vxlan", "id", str(VNI),
            "local", underlay.local, "remote", underlay.remote, "dstport", str(PORT), *bind,
        ]  # fmt: skip

    def build(self, site: Site, spec: TunnelSpec) -> TunnelHandle:
        implementation, mtu = spec.implementation, spec.mtu
        handle = TunnelHandle(self.kind, implementation, self.version(implementation), mtu)
        ends = underlays(site, spec, "udp", handle)
        for role in site.tunnel_ends:
            device = site.ifname(f"vx{role[0]}{role[-1]}")
            site.ip_batch(role, [self.setup_commands(site, role, device, mtu, ends[role])])
            self.address_and_route(site, role, device, mtu)
            handle.devices[role] = device
        return handle
