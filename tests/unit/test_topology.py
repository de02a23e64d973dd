"""The address and route plan of each topology (golden)."""

from tunnelbench.kinds import Topology
from tunnelbench.lab.topology import CHAINS, Route, remote_prefixes, routes_for

RW = CHAINS[Topology.ROAD_WARRIOR]
S2S = CHAINS[Topology.SITE_TO_SITE]


def test_road_warrior_without_tunnel():
    assert routes_for(RW, "client", 4, tunnel=False) == [
        Route("198.18.1.0/24", "198.18.0.2", False)
    ]
    assert routes_for(RW, "gw", 4, tunnel=False) == []
    assert routes_for(RW, "server", 4, tunnel=False) == [
        Route("198.18.0.0/24", "198.18.1.1", False)
    ]


def test_road_warrior_with_tunnel_routes_the_server_lan_through_it():
    assert routes_for(RW, "client", 4, tunnel=True) == [Route("198.18.1.0/24", None, True)]
    # The server reaches the tunnel's inner addresses through the gateway.
    assert routes_for(RW, "server", 6, tunnel=True) == [
        Route("2001:2:0:0::/64", "2001:2:0:1::1", False),
        Route("2001:2:0:ff::/64", "2001:2:0:1::1", False),
    ]
    assert remote_prefixes(RW, "client", 4) == ["198.18.1.0/24"]
    assert remote_prefixes(RW, "gw", 4) == []


def test_site_to_site_with_tunnel():
    assert RW.tunnel_ends == ("client", "gw")
    assert S2S.tunnel_ends == ("gwa", "gwb")
    assert routes_for(S2S, "gwa", 4, tunnel=True) == [Route("198.18.2.0/24", None, True)]
    assert routes_for(S2S, "gwb", 4, tunnel=True) == [Route("198.18.0.0/24", None, True)]
    assert routes_for(S2S, "client", 4, tunnel=True) == [
        Route("198.18.1.0/24", "198.18.0.2", False),
        Route("198.18.2.0/24", "198.18.0.2", False),
        Route("198.19.0.0/24", "198.18.0.2", False),
    ]
    assert remote_prefixes(S2S, "gwb", 4) == ["198.18.0.0/24"]


def test_site_to_site_without_tunnel_routes_hop_by_hop():
    assert routes_for(S2S, "gwa", 4, tunnel=False) == [Route("198.18.2.0/24", "198.18.1.2", False)]
    assert routes_for(S2S, "server", 4, tunnel=False) == [
        Route("198.18.0.0/24", "198.18.2.1", False),
        Route("198.18.1.0/24", "198.18.2.1", False),
    ]
