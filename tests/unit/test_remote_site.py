"""The hosts of a hosts file as a tunnel's site, without hosts: the inner addresses in
the prefix both share, the one host route each end sends into the tunnel, how each
change is reversed, and which kinds a hosts file may build (the lab's kinds that build
through a site alone and carry IPv4)."""

from pathlib import Path

import pytest

from tunnelbench.errors import UserError
from tunnelbench.kinds import TunnelKind
from tunnelbench.lab.topology import Underlay
from tunnelbench.model.plan import TunnelSettings
from tunnelbench.remote import hostsfile, session, software
from tunnelbench.remote.probes import Facts
from tunnelbench.remote.session import Session
from tunnelbench.remote.site import HostsSite, shared_prefix, undo_of
from tunnelbench.remote.software import WIREGUARD_MODULE, ModuleState, Software, link_types
from tunnelbench.tunnels import REGISTRY
from tunnelbench.tunnels.site import Site

ROAD = """
[client]
ssh = "client"
[gw]
ssh = "gw"
address = "192.168.1.1"
[server]
ssh = "server"
address = "10.0.20.5"
[tunnel]
mode = "build"
kind = "vxlan"
via = "10.0.20.1"
"""
SITE = """
layout = "site-to-site"
[client]
ssh = "pc-a"
address = "10.1.0.2"
[gwa]
ssh = "gwa"
[gwb]
ssh = "gwb"
address = "203.0.113.2"
[server]
ssh = "pc-b"
address = "10.2.0.2"
[tunnel]
mode = "build"
kind = "gretap"
ends = ["gwa", "gwb"]
inner = ["172.16.9.1", "172.16.9.2"]
"""


def site(text: str) -> HostsSite:
    return HostsSite(Session(hostsfile.parse(text, Path("/tmp/hosts.toml"))))


def test_a_road_warrior_site_routes_the_server_into_the_tunnel_and_nothing_else():
    s = site(ROAD)
    assert s.tunnel_ends == ("client", "gw") and s.families == (4,)
    assert s.inner_address("client", 4) == "198.19.0.1/30"
    assert s.inner_address("gw", 4) == "198.19.0.2/30"
    assert s.inner_peer("client", 4) == "198.19.0.2"  # an L2 tunnel's next hop
    assert s.inner_routes("client", 4) == ["10.0.20.5/32"]
    assert s.inner_routes("gw", 4) == []  # the client's inner address is on the tunnel's subnet
    assert len(s.ifname("vxgw")) <= 15 and s.ifname("vxgw").startswith("tb")


def test_a_site_to_site_site_routes_each_sides_endpoint():
    s = site(SITE)
    assert s.inner_routes("gwa", 4) == ["10.2.0.2/32"]
    assert s.inner_routes("gwb", 4) == ["10.1.0.2/32"]
    assert s.inner_address("gwb", 4) == "172.16.9.2/30"


@pytest.mark.parametrize(
    ("a", "b", "length"),
    [("198.19.0.1", "198.19.0.2", 30), ("10.0.0.1", "10.0.0.6", 29), ("10.0.0.1", "10.0.1.1", 23)],
)
def test_the_inner_prefix_is_the_smallest_that_holds_both(a, b, length):
    assert shared_prefix(a, b) == length


def test_each_change_is_reversed_and_an_unexpected_one_refused():
    assert undo_of(["link", "add", "tbab-vxgw", "mtu", "1450", "type", "vxlan"]) == [
        "ip", "link", "del", "tbab-vxgw",
    ]  # fmt: skip
    assert undo_of(["route", "add", "10.0.20.5/32", "dev", "x"]) == [
        "ip", "route", "del", "10.0.20.5/32",
    ]  # fmt: skip
    assert undo_of(["address", "add", "198.19.0.1/30", "dev", "x"]) is None  # with its link
    with pytest.raises(ValueError, match="a site is not given `ip rule add"):
        undo_of(["rule", "add", "from", "all"])


def test_the_kinds_a_hosts_file_builds_are_the_labs_that_build_anywhere():
    assert hostsfile.BUILDABLE == (
        "wireguard",
        "vxlan",
        "gre",
        "gretap",
        "ipip",
        "sit",
        "geneve",
        "openvpn",
        "ipsec",
    )
    for kind in REGISTRY.kinds():
        assert REGISTRY.get(kind).anywhere is (kind.value in hostsfile.BUILDABLE), kind


def test_the_labs_vxlan_code_builds_on_a_hosts_site():
    """The kind's own build, given a hosts file's site: its link between the underlay
    the ends' routes gave, its inner address and its one route, in that order."""
    s: Site = site(ROAD)
    assert isinstance(s, HostsSite)
    s._underlays = {
        "client": Underlay("192.168.1.50", "192.168.1.1", "wlan0"),
        "gw": Underlay("192.168.1.1", "192.168.1.50", "br-lan"),
    }
    sent: dict[str, list[list[str]]] = {}
    s.ip_batch = lambda role, commands: sent.setdefault(role, []).extend(commands)  # type: ignore[method-assign]
    vxlan = REGISTRY.get(TunnelKind.VXLAN)
    spec = vxlan.resolve(TunnelSettings(kind=TunnelKind.VXLAN), 1500)
    handle = vxlan.build(s, spec)
    client = handle.devices["client"]
    assert sent["client"] == [
        ["link", "add", client, "mtu", "1450", "type", "vxlan", "id", "42", "local",
         "192.168.1.50", "remote", "192.168.1.1", "dstport", "4789", "dev", "wlan0"],
        ["link", "set", client, "mtu", "1450", "up"],
        ["address", "add", "198.19.0.1/30", "dev", client],
        ["route", "add", "10.0.20.5/32", "via", "198.19.0.2", "dev", client],
    ]  # fmt: skip
    assert sent["gw"][0][-2:] == ["dev", "br-lan"] and sent["gw"][2][2] == "198.19.0.2/30"
    assert len(sent["gw"]) == 3  # no route: the client's inner address is on the subnet


@pytest.mark.parametrize(
    ("tunnel", "message"),
    [
        ('kind = "none"', "tunnel.kind: 'none': tunnelbench builds wireguard, vxlan, gre"),
        ('kind = "vxlan"\nimplementation = "wireguard-go"',
         "tunnel.implementation: 'wireguard-go': vxlan is built by 'auto', 'kernel'"),
        ('kind = "openvpn"\nimplementation = "kernel"',
         "tunnel.implementation: 'kernel': openvpn is built by 'auto', 'openvpn'"),
    ],
)  # fmt: skip
def test_a_kind_real_hosts_cannot_build_is_refused_by_name(tunnel, message):
    text = ROAD.replace('kind = "vxlan"', tunnel)
    with pytest.raises(UserError) as caught:
        hostsfile.parse(text, Path("/tmp/hosts.toml"))
    assert message in str(caught.value)


IPROUTE2 = "ipversion ip utility, iproute2-6.1.0"
IPROUTE2_HELP = (
    "Usage: ip link add [link DEV | parentdev NAME] [ name ] NAME ... "
    "TYPE := { amt | bareudp | bond | bridge | geneve | gre | gretap | ipip | vxlan | "
    "wireguard | xfrm }  ETYPE := { TYPE | bridge_slave | bond_slave }"
)


@pytest.mark.parametrize(
    ("lines", "kind", "able", "why"),
    [
        (["kmodule vxlan loaded", f"iplinks {IPROUTE2_HELP}", IPROUTE2],
         "vxlan", True, "module vxlan loaded or built in"),
        (["kmodule ip_gre available", f"iplinks {IPROUTE2_HELP}", IPROUTE2],
         "gretap", True, "module ip_gre available (loaded on first use)"),
        # not found: a module built in without parameters has no /sys/module entry
        (["kmodule ipip none", f"iplinks {IPROUTE2_HELP}", IPROUTE2],
         "ipip", None, "module ipip not found"),
        (["kmodule vxlan loaded", "iplinks ip: invalid argument 'help' to 'ip'",
          "ipversion BusyBox v1.35.0 (Debian 1:1.35.0-4) multi-call binary."],
         "vxlan", False, "module vxlan loaded or built in; ip is not iproute2's (busybox's cannot"
         " create vxlan links)"),
        (["kmodule geneve loaded", "iplinks TYPE := { vxlan | gre }", "ipversion iproute2-5.4"],
         "geneve", False, "module geneve loaded or built in; this ip cannot create geneve links"),
        # found nowhere: the probe in a throwaway namespace answers (this machine's lines)
        (["kmodule ip_gre none", f"iplinks {IPROUTE2_HELP}", IPROUTE2,
          "klink gre refused Error: Unknown device type."],
         "gre", False, "module ip_gre not found; the kernel refused a link of type gre: Error:"
         " Unknown device type."),
        (["kmodule ipip none", f"iplinks {IPROUTE2_HELP}", IPROUTE2, "klink ipip ok"],
         "ipip", True, "module ipip not found; built in (a probe made a link of type ipip)"),
    ],
)  # fmt: skip
def test_a_host_says_which_kinds_it_can_build_and_why(lines, kind, able, why):
    found = Software()
    for line in lines:
        key, _, rest = line.partition(" ")
        assert found.parse_line(key, rest)
    assert found.can_build(kind) == (able, why)


def test_iproute2s_link_types_are_read_from_its_help():
    types = link_types(IPROUTE2_HELP)
    assert types is not None and {"vxlan", "gretap", "geneve", "ipip", "gre"} <= types
    assert "bridge_slave" not in types  # ETYPE's, not TYPE's
    assert link_types("ip: invalid argument 'help' to 'ip'") is None


def test_a_kind_whose_end_runs_the_kernels_or_a_daemon_says_which_per_host():
    """WireGuard's end runs the kernel's where the host has the module, else its
    wireguard-go (the kind's ``auto_order``): neither is a refusal naming both."""
    facts = Facts(programs={"wg": "/usr/bin/wg", "ip": "/sbin/ip"})
    facts.software.modules[WIREGUARD_MODULE] = ModuleState.NONE
    assert session.can_build(TunnelKind.WIREGUARD, facts) == (
        False,
        "no WireGuard module in its kernel and no wireguard-go",
    )
    facts.programs["wireguard-go"] = "/usr/local/bin/wireguard-go"
    assert session.can_build(TunnelKind.WIREGUARD, facts) == (
        True,
        "runs wg (/usr/bin/wg), ip (/sbin/ip), wireguard-go (/usr/local/bin/wireguard-go)",
    )
    facts.software.modules[WIREGUARD_MODULE] = ModuleState.AVAILABLE
    assert session.can_build(TunnelKind.WIREGUARD, facts)[1].endswith(", the kernel's WireGuard")
    # a daemon kind lists the programs its ends run, with the package of a missing one
    assert session.can_build(TunnelKind.IPSEC, facts) == (
        False,
        "/usr/lib/ipsec/charon (strongswan-charon) is not installed; swanctl"
        " (strongswan-swanctl) is not installed; unshare (util-linux) is not installed;"
        " mount is not installed",
    )


def test_the_probe_of_a_kernel_link_runs_only_where_its_module_is_found_nowhere():
    """Its link is made in a namespace of its own (``unshare -n``), by iproute2's ip."""
    script = software.SCRIPT
    assert 'if [ "$probing" = yes ] && [ "$km_ip_gre" = none ]; then' in script
    probe = "unshare -n ip link add tbprobe0 type gretap remote 198.18.0.2 local 198.18.0.1"
    assert probe in script
    assert "*iproute2*) command -v unshare" in script


FACTS_IPROUTE2 = ["kmodule vxlan loaded", f"iplinks {IPROUTE2_HELP}", IPROUTE2]


def facts_with(programs: dict[str, str], lines: list[str]) -> Facts:
    facts = Facts(programs=dict(programs))
    for line in lines:
        key, _, rest = line.partition(" ")
        assert facts.software.parse_line(key, rest)
    return facts


def test_the_programs_of_the_esp_around_a_tunnel_are_checked_before_any_trial():
    """VXLAN in IPsec on a router without strongSwan: refused by the run's checks and
    `hosts check`, as plain ipsec is, not after a no-tunnel trial."""
    wrapped = ROAD.replace('via = "10.0.20.1"', 'via = "10.0.20.1"\nprotection = "ipsec"')
    hosts = hostsfile.parse(wrapped, Path("/tmp/hosts.toml"))
    tools = {p: f"/usr/bin/{p}" for p in ("ip", "iperf3", "unshare", "mount")}
    facts = {role: facts_with(tools, FACTS_IPROUTE2) for role in ("client", "gw", "server")}
    problems = session.missing(hosts, facts)
    assert problems == [
        f"{role}: {tool} is not installed; it sets up the tunnel or its ipsec"
        for role in ("client", "gw")
        for tool in ("/usr/lib/ipsec/charon (strongswan-charon)", "swanctl (strongswan-swanctl)")
    ]
    # without the protection the same hosts build VXLAN
    assert session.missing(hostsfile.parse(ROAD, Path("/tmp/hosts.toml")), facts) == []


def test_a_kind_the_kernel_refused_is_a_problem_before_any_trial():
    gre = ROAD.replace('kind = "vxlan"', 'kind = "gre"')
    hosts = hostsfile.parse(gre, Path("/tmp/hosts.toml"))
    refused = "klink gre refused Error: Unknown device type."
    lines = [*FACTS_IPROUTE2, "kmodule ip_gre none", refused]
    facts = {r: facts_with({"ip": "/sbin/ip", "iperf3": "/usr/bin/iperf3"}, lines) for r in ROLES}
    assert session.missing(hosts, facts) == [
        f"{role}: cannot build gre: module ip_gre not found; the kernel refused a link of type"
        " gre: Error: Unknown device type."
        for role in ("client", "gw")
    ]


ROLES = ("client", "gw", "server")
