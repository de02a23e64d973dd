"""What the kernel's IP tunnels (gre, gretap, ipip, geneve) share: one ``ip link add`` at
each end, between the two ends' WAN IPv4 addresses, then addresses and routes.

Each kind names its link type, its encapsulation in the ceiling model (its overhead is
read from there, so the lab's default MTU and the ceiling cannot disagree) and what follows
``type <link type>`` on the command line. The underlay addresses are the WAN's, or with
``tunnel.protection = "ipsec"`` (gre, gretap) what :func:`tunnelbench.tunnels.esp.protect`
returns: ESP tunnel mode carries the tunnel between the ends' own endpoint addresses.
"""

import platform
from typing import ClassVar

from tunnelbench.lab.topology import Underlay
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.system.probing import PROBE_LOCAL, PROBE_REMOTE
from tunnelbench.tunnels.base import Tunnel, TunnelHandle, TunnelSpec
from tunnelbench.tunnels.esp import underlays
from tunnelbench.tunnels.site import Site

#: The lab's tunnels run over the WAN link's IPv4 addresses (see ``endpoints``).
UNDERLAY_FAMILY = 4


class KernelLinkTunnel(Tunnel):
    """An unencrypted tunnel the kernel creates as a link of type :attr:`link_type`."""

    implementations: ClassVar[tuple[str, ...]] = ("kernel",)
    #: ``ip link add DEVICE ... type LINK_TYPE``.
    link_type: ClassVar[str]
    #: The same encapsulation in the ceiling model (:mod:`tunnelbench.model.encapsulation`).
    encapsulation: ClassVar[Encapsulation]
    #: The device's name in the lab: ``tb<lab>-<device_prefix><role's first and last letter>``.
    device_prefix: ClassVar[str]
    #: The IP protocol of the tunnel's packets, which ESP protects in transport mode
    #: (protectable kinds only).
    protocol: ClassVar[str | None] = None
    #: What ``ip link add ... type LINK_TYPE`` needs besides the type, for a probe.
    probe_args: ClassVar[tuple[str, ...]] = ("remote", PROBE_REMOTE, "local", PROBE_LOCAL)

    def link_probe(self) -> tuple[str, tuple[str, ...]]:
        return self.link_type, self.probe_args

    def version(self, implementation: str) -> str:
        return f"linux {platform.release()}"

    def device(self, site: Site, role: str) -> str:
        return site.ifname(f"{self.device_prefix}{role[0]}{role[-1]}")

    def link_options(
        self, site: Site, role: str, spec: TunnelSpec, underlay: Underlay | None = None
    ) -> list[str]:
        """What follows ``type <link type>``: the two endpoints and the device the
        tunnel's packets leave by (``dev``; none when ESP's tunnel mode carries them).
        ``underlay`` defaults to the WAN's: the two ends' WAN IPv4 addresses, whatever
        the traffic's family."""
        underlay = underlay or site.wan_underlay(role)
        bind = ["dev", underlay.device] if underlay.device is not None else []
        return ["remote", underlay.remote, "local", underlay.local, *bind]

    def setup_commands(
        self, site: Site, role: str, spec: TunnelSpec, underlay: Underlay | None = None
    ) -> list[str]:
        """The ``ip`` command (batch line) creating ``role``'s tunnel device."""
        return [
            "link", "add", self.device(site, role), "mtu", str(spec.mtu),
            "type", self.link_type, *self.link_options(site, role, spec, underlay),
        ]  # fmt: skip

    def build(self, site: Site, spec: TunnelSpec) -> TunnelHandle:
        implementation = spec.implementation
        handle = TunnelHandle(self.kind, implementation, self.version(implementation), spec.mtu)
        ends = underlays(site, spec, self.protocol, handle)
        for role in site.tunnel_ends:
            device = self.device(site, role)
            site.ip_batch(role, [self.setup_commands(site, role, spec, ends[role])])
            self.address_and_route(site, role, device, spec.mtu)
            handle.devices[role] = device
        return handle
