"""VXLAN (kernel): Ethernet in UDP, unencrypted; an L2 tunnel."""

import platform
from typing import ClassVar

from tunnelbench.kinds import TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.tunnels.base import Tunnel, TunnelHandle, TunnelSpec

VNI = 42
PORT = 4789


class Vxlan(Tunnel):
    kind = TunnelKind.VXLAN
    implementations: ClassVar[tuple[str, ...]] = ("kernel",)
    layer2 = True

    def overhead(self, spec: TunnelSpec, outer_family: int = 4) -> int:
        # outer IP + UDP 8 + VXLAN 8 + inner Ethernet 14
        return (20 if outer_family == 4 else 40) + 8 + 8 + 14

    def version(self, implementation: str) -> str:
        return f"linux {platform.release()}"

    def setup_commands(self, lab: Lab, role: str, device: str, mtu: int) -> list[str]:
        left, right = lab.chain.tunnel_ends
        peer = right if role == left else left
        return [
            "link", "add", device, "mtu", str(mtu), "type", "vxlan", "id", str(VNI),
            "local", lab.address(role, peer, 4), "remote", lab.address(peer, role, 4),
            "dstport", str(PORT), "dev", lab.wan_device(role),
        ]  # fmt: skip

    def setup(self, lab: Lab, spec: TunnelSpec) -> TunnelHandle:
        implementation, mtu = spec.implementation, spec.mtu
        handle = TunnelHandle(self.kind, implementation, self.version(implementation), mtu)
        for role in lab.chain.tunnel_ends:
            device = lab.ifname(f"vx{role[0]}{role[-1]}")
            lab.ip_batch(role, [self.setup_commands(lab, role, device, mtu)])
            self.address_and_route(lab, role, device, mtu)
            handle.devices[role] = device
        return handle
