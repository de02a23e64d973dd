"""Topologies as chains of roles, and the address and route plan that follows from them.

Every topology here is a chain ``client - ... - server`` whose links are numbered left to
right; the tunnel, when there is one, spans the link named ``wan``. Link *j* uses
198.18.j.0/24 and 2001:2:0:j::/64 (left end .1/::1, right end .2/::2); the tunnel's inner
addresses are 198.19.0.0/24 and 2001:2:0:ff::/64. Routes are explicit, one per prefix, so a
lab never depends on default routes.
"""

from dataclasses import dataclass

from tunnelbench.kinds import Topology

TUNNEL_V4 = "198.19.0"
TUNNEL_V6 = "2001:2:0:ff"


@dataclass(frozen=True)
class Chain:
    roles: tuple[str, ...]
    links: tuple[str, ...]  # links[j] joins roles[j] and roles[j + 1]

    @property
    def client(self) -> str:
        return self.roles[0]

    @property
    def server(self) -> str:
        return self.roles[-1]

    @property
    def wan(self) -> int:
        return self.links.index("wan")

    @property
    def tunnel_ends(self) -> tuple[str, str]:
        return self.roles[self.wan], self.roles[self.wan + 1]


CHAINS: dict[Topology, Chain] = {
    Topology.ROAD_WARRIOR: Chain(roles=("client", "gw", "server"), links=("wan", "lan")),
    Topology.SITE_TO_SITE: Chain(
        roles=("client", "gwa", "gwb", "server"), links=("lan-a", "wan", "lan-b")
    ),
}


def link_prefix(index: int, family: int) -> str:
    return f"198.18.{index}.0/24" if family == 4 else f"2001:2:0:{index}::/64"


def link_address(index: int, left: bool, family: int) -> str:
    host = 1 if left else 2
    return f"198.18.{index}.{host}" if family == 4 else f"2001:2:0:{index}::{host}"


def tunnel_prefix(family: int) -> str:
    return f"{TUNNEL_V4}.0/24" if family == 4 else f"{TUNNEL_V6}::/64"


def tunnel_address(left: bool, family: int) -> str:
    host = 1 if left else 2
    return f"{TUNNEL_V4}.{host}" if family == 4 else f"{TUNNEL_V6}::{host}"


def plen(family: int) -> int:
    return 24 if family == 4 else 64


@dataclass(frozen=True)
class Underlay:
    """Where a tunnel's outer packets go: its local and remote addresses (IPv4), and
    the device it binds to (None: routing decides, e.g. into ESP)."""

    local: str
    remote: str
    device: str | None


@dataclass(frozen=True)
class Route:
    prefix: str
    via: str | None  # next-hop address; None for a tunnel device route (WireGuard)
    tunnel: bool  # True: through the tunnel device


def routes_for(chain: Chain, role: str, family: int, tunnel: bool) -> list[Route]:
    """The routes ``role`` needs to reach every lab prefix it is not attached to."""
    i = chain.roles.index(role)
    left_end, right_end = chain.wan, chain.wan + 1
    routes = []
    for j in range(len(chain.links)):
        if j in (i - 1, i):
            continue
        rightward = j >= i
        through_tunnel = tunnel and (
            (i == left_end and j > chain.wan) or (i == right_end and j < chain.wan)
        )
        if through_tunnel:
            routes.append(Route(link_prefix(j, family), None, tunnel=True))
        elif rightward:
            routes.append(Route(link_prefix(j, family), link_address(i, False, family), False))
        else:
            routes.append(Route(link_prefix(j, family), link_address(i - 1, True, family), False))
    if tunnel and i < left_end:
        routes.append(Route(tunnel_prefix(family), link_address(i, False, family), False))
    if tunnel and i > right_end:
        routes.append(Route(tunnel_prefix(family), link_address(i - 1, True, family), False))
    return routes


def remote_prefixes(chain: Chain, role: str, family: int) -> list[str]:
    """Prefixes a tunnel end must send through the tunnel (for WireGuard's allowed IPs)."""
    return [r.prefix for r in routes_for(chain, role, family, tunnel=True) if r.tunnel]
