"""Tunnel kinds: one module each, one interface (:class:`Tunnel`) and one registry."""

from tunnelbench.kinds import TunnelKind
from tunnelbench.registry import Registry
from tunnelbench.tunnels.base import Tunnel, TunnelHandle
from tunnelbench.tunnels.geneve import Geneve
from tunnelbench.tunnels.gre import Gre, GreTap
from tunnelbench.tunnels.ipip import Ipip
from tunnelbench.tunnels.ipsec import Ipsec
from tunnelbench.tunnels.none import NoTunnel
from tunnelbench.tunnels.openvpn import OpenVpn
from tunnelbench.tunnels.sit import Sit
from tunnelbench.tunnels.vxlan import Vxlan
from tunnelbench.tunnels.wireguard import WireGuard

REGISTRY: Registry[TunnelKind, Tunnel] = Registry("tunnel kind")
for _tunnel in (
    NoTunnel(),
    WireGuard(),
    Vxlan(),
    Gre(),
    GreTap(),
    Ipip(),
    Sit(),
    Geneve(),
    OpenVpn(),
    Ipsec(),
):
    REGISTRY.register(_tunnel.kind, _tunnel)

__all__ = ["REGISTRY", "Tunnel", "TunnelHandle"]
