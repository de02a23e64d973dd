"""No tunnel: plain routing across the WAN, the baseline every tunnel is compared with."""

import platform
from typing import ClassVar

from tunnelbench.kinds import TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.tunnels.base import Tunnel, TunnelHandle, TunnelSpec


class NoTunnel(Tunnel):
    kind = TunnelKind.NONE
    implementations: ClassVar[tuple[str, ...]] = ("kernel",)
    encapsulation = Encapsulation.NONE
    display = "no tunnel"

    def overhead(self, spec: TunnelSpec, outer_family: int = 4) -> int:
        return 0

    def version(self, implementation: str) -> str:
        return f"linux {platform.release()}"

    def setup(self, lab: Lab, spec: TunnelSpec) -> TunnelHandle:
        implementation = spec.implementation
        return TunnelHandle(self.kind, implementation, self.version(implementation), spec.mtu)
