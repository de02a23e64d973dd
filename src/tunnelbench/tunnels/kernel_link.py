"""What the kernel's IP tunnels (gre, gretap, ipip, geneve) share: one ``ip link add`` at
each end, between the two ends' WAN IPv4 addresses, then addresses and routes.

Each kind names its link type, its encapsulation in the ceiling model (its overhead is
read from there, so the lab's default MTU and the ceiling cannot disagree) and what follows
``type <link type>`` on the command line. The underlay addresses come from one method,
:meth:`KernelLinkTunnel.endpoints`, so that a protected variant (GRE inside IPsec) can
run the tunnel between other addresses without touching the command lines.
"""

import platform
from typing import ClassVar

from tunnelbench.analysis.encapsulation import Encapsulation, fields
from tunnelbench.lab.netns import Lab
from tunnelbench.tunnels.base import Tunnel, TunnelHandle, TunnelSpec

#: The lab's tunnels run over the WAN link's IPv4 addresses (see ``endpoints``).
UNDERLAY_FAMILY = 4


class KernelLinkTunnel(Tunnel):
    """An unencrypted tunnel the kernel creates as a link of type :attr:`link_type`."""

    implementations: ClassVar[tuple[str, ...]] = ("kernel",)
    #: ``ip link add DEVICE ... type LINK_TYPE``.
    link_type: ClassVar[str]
    #: The same encapsulation in the ceiling model (:mod:`tunnelbench.analysis.encapsulation`).
    encapsulation: ClassVar[Encapsulation]
    #: The device's name in the lab: ``tb<lab>-<device_prefix><role's first and last letter>``.
    device_prefix: ClassVar[str]

    def overhead(self, spec: TunnelSpec, outer_family: int = 4) -> int:
        # The ceiling model's fields with its default options: no GRE key, checksum or
        # sequence number, no Geneve options (the lab sets none of them).
        return sum(size for _, size in fields(self.encapsulation, outer_family))

    def version(self, implementation: str) -> str:
        return f"linux {platform.release()}"

    def device(self, lab: Lab, role: str) -> str:
        return lab.ifname(f"{self.device_prefix}{role[0]}{role[-1]}")

    def endpoints(self, lab: Lab, role: str, spec: TunnelSpec) -> tuple[str, str]:
        """The underlay addresses ``(local, remote)`` of ``role``'s end: its own and the
        other tunnel end's address on the WAN link (IPv4, whatever the traffic's family).

        The one place the underlay is chosen: IPsec protection may override it.
        """
        left, right = lab.chain.tunnel_ends
        peer = right if role == left else left
        return lab.address(role, peer, UNDERLAY_FAMILY), lab.address(peer, role, UNDERLAY_FAMILY)

    def link_options(self, lab: Lab, role: str, spec: TunnelSpec) -> list[str]:
        """What follows ``type <link type>``: by default the two endpoints and the WAN
        device the tunnel's packets leave by (``dev``)."""
        local, remote = self.endpoints(lab, role, spec)
        return ["remote", remote, "local", local, "dev", lab.wan_device(role)]

    def setup_commands(self, lab: Lab, role: str, spec: TunnelSpec) -> list[str]:
        """The ``ip`` command (batch line) creating ``role``'s tunnel device."""
        return [
            "link", "add", self.device(lab, role), "mtu", str(spec.mtu),
            "type", self.link_type, *self.link_options(lab, role, spec),
        ]  # fmt: skip

    def setup(self, lab: Lab, spec: TunnelSpec) -> TunnelHandle:
        implementation = spec.implementation
        handle = TunnelHandle(self.kind, implementation, self.version(implementation), spec.mtu)
        for role in lab.chain.tunnel_ends:
            device = self.device(lab, role)
            lab.ip_batch(role, [self.setup_commands(lab, role, spec)])
            self.address_and_route(lab, role, device, spec.mtu)
            handle.devices[role] = device
        return handle
