"""The kernel's IP tunnels (gre, gretap, ipip, geneve): the exact commands that build them
in both topologies, their overheads and default MTUs, and why they are skipped.

The labs here are Lab objects named like real ones with nothing built (only names and
addresses matter); ``ip_batch`` is replaced by a recorder, so every command a set-up would
send to ``ip -batch`` is checked. The skip reasons come from the probes' real output on
the development VM, whose kernel lacks all four (tests/fixtures/capabilities).
"""

import json
from dataclasses import replace

import pytest

from tests.conftest import FIXTURES
from tests.unit.probe_fixtures import lab_like
from tunnelbench.bench import capabilities as c
from tunnelbench.bench import skips
from tunnelbench.cli import doctor
from tunnelbench.errors import UserError
from tunnelbench.kinds import EspMode, Protection, Topology, TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.lab.topology import Underlay
from tunnelbench.model.encapsulation import default_tunnel_mtu, fields
from tunnelbench.model.plan import LabSettings, TrafficSettings, TrialConfig, TunnelSettings
from tunnelbench.system import probing
from tunnelbench.system.probing import Capabilities, CgroupCpu, Check, Congestion, Program
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.base import TunnelSpec
from tunnelbench.tunnels.esp import protected_ends
from tunnelbench.tunnels.kernel_link import KernelLinkTunnel

KERNEL_LINKS = (TunnelKind.GRE, TunnelKind.GRETAP, TunnelKind.IPIP, TunnelKind.GENEVE)
COMMANDS = json.loads((FIXTURES / "capabilities" / "commands.json").read_text())
LAB_ID = "k1a2b3"


def kernel_link(kind: TunnelKind) -> KernelLinkTunnel:
    tunnel = TUNNELS.get(kind)
    assert isinstance(tunnel, KernelLinkTunnel)
    return tunnel


def lab(topology: Topology) -> Lab:
    return lab_like(LAB_ID, LabSettings(topology=topology))


def recorded_setup(kind: TunnelKind, topology: Topology) -> dict[str, list[list[str]]]:
    """Every ``ip`` batch line the set-up sends, by namespace role, in order."""
    tunnel, built = TUNNELS.get(kind), lab(topology)
    sent: dict[str, list[list[str]]] = {}
    built.ip_batch = lambda role, commands: sent.setdefault(role, []).extend(commands)  # type: ignore[method-assign]
    spec = tunnel.resolve(TunnelSettings(kind=kind), 1500)
    handle = tunnel.setup(built, spec)
    assert handle.implementation == "kernel" and handle.mtu == spec.mtu
    assert handle.devices == {role: tunnel.device(built, role) for role in sent}  # type: ignore[attr-defined]
    return sent


# --- the device each end creates: exact argv, both topologies ---

# Road-warrior: client (198.18.0.1) ═ gw (198.18.0.2) over link 0; each end's WAN device
# is named after its peer. Site-to-site: gwa (198.18.1.1) ═ gwb (198.18.1.2) over link 1.
RW = {
    "client": ("198.18.0.1", "198.18.0.2", "tbk1a2b3-gw"),
    "gw": ("198.18.0.2", "198.18.0.1", "tbk1a2b3-client"),
}
S2S = {
    "gwa": ("198.18.1.1", "198.18.1.2", "tbk1a2b3-gwb"),
    "gwb": ("198.18.1.2", "198.18.1.1", "tbk1a2b3-gwa"),
}


@pytest.mark.parametrize(
    ("kind", "topology", "role", "argv"),
    [
        (kind, topology, role, line)
        for topology, ends in ((Topology.ROAD_WARRIOR, RW), (Topology.SITE_TO_SITE, S2S))
        for role, (local, remote, wan) in ends.items()
        for kind, line in (
            (
                TunnelKind.GRE,
                ["link", "add", f"tbk1a2b3-gre{role[0]}{role[-1]}", "mtu", "1476", "type", "gre",
                 "remote", remote, "local", local, "dev", wan],
            ),
            (
                TunnelKind.GRETAP,
                ["link", "add", f"tbk1a2b3-gtap{role[0]}{role[-1]}", "mtu", "1462",
                 "type", "gretap", "remote", remote, "local", local, "dev", wan],
            ),
            (
                TunnelKind.IPIP,
                ["link", "add", f"tbk1a2b3-ipip{role[0]}{role[-1]}", "mtu", "1480",
                 "type", "ipip", "remote", remote, "local", local, "dev", wan],
            ),
            (
                TunnelKind.GENEVE,
                ["link", "add", f"tbk1a2b3-gnv{role[0]}{role[-1]}", "mtu", "1450",
                 "type", "geneve", "id", "42", "remote", remote, "dstport", "6081"],
            ),
        )
    ],
)  # fmt: skip
def test_each_end_creates_its_device_between_the_wan_addresses(kind, topology, role, argv):
    tunnel = kernel_link(kind)
    spec = tunnel.resolve(TunnelSettings(kind=kind), 1500)
    assert tunnel.setup_commands(lab(topology), role, spec) == argv


def test_the_endpoints_are_the_wan_ipv4_addresses_whatever_the_family():
    for topology, ends in ((Topology.ROAD_WARRIOR, RW), (Topology.SITE_TO_SITE, S2S)):
        for role, (local, remote, wan) in ends.items():
            assert lab(topology).wan_underlay(role) == Underlay(local, remote, wan)


@pytest.mark.parametrize(
    ("kind", "overhead", "mtu"),
    # libipsec: ESP in UDP (NAT-T) tunnel mode around the GRE packet, AES-GCM:
    # outer IPv4 20 + UDP 8 + ESP header 8 + IV 8 + pad length/next header 2 + ICV 16
    # = 62 bytes of ESP; its TUN carries at most 1400-byte packets, so gre's MTU is
    # 1400 - 24 = 1376 and gretap's 1400 - 38 = 1362.
    [(TunnelKind.GRE, 24 + 62, 1376), (TunnelKind.GRETAP, 38 + 62, 1362)],
)
def test_gre_and_gretap_in_ipsec_add_esp_and_fit_libipsecs_packets(kind, overhead, mtu):
    tunnel = kernel_link(kind)
    spec = tunnel.resolve(TunnelSettings(kind=kind, protection=Protection.IPSEC), 1500)
    assert spec.esp_implementation == "libipsec"
    assert tunnel.overhead(spec, 4) == overhead
    assert spec.mtu == mtu


def test_gretap_in_esp_tunnel_mode_runs_between_the_endpoint_addresses():
    gretap = kernel_link(TunnelKind.GRETAP)
    spec = gretap.resolve(TunnelSettings(kind=TunnelKind.GRETAP, protection=Protection.IPSEC), 1500)
    ends = protected_ends(lab(Topology.ROAD_WARRIOR), spec.esp_mode, "gre")
    underlay, (child,) = ends["client"]
    assert underlay == Underlay("198.19.1.1", "198.19.1.2", None)
    assert (child.local_ts, child.remote_ts) == (("198.19.1.1/32",), ("198.19.1.2/32",))
    assert gretap.setup_commands(lab(Topology.ROAD_WARRIOR), "client", spec, underlay) == [
        "link", "add", "tbk1a2b3-gtapct", "mtu", "1362", "type", "gretap",
        "remote", "198.19.1.2", "local", "198.19.1.1",
    ]  # fmt: skip


def test_gre_in_esp_transport_mode_protects_gre_between_the_wan_addresses():
    ends = protected_ends(lab(Topology.SITE_TO_SITE), EspMode.TRANSPORT, "gre")
    underlay, (child,) = ends["gwa"]
    local, remote, wan = S2S["gwa"]
    assert underlay == Underlay(local, remote, wan)
    assert (child.local_ts, child.remote_ts) == (("dynamic[gre]",), ("dynamic[gre]",))


def test_an_explicit_mtu_reaches_the_command_line():
    gretap = kernel_link(TunnelKind.GRETAP)
    spec = gretap.resolve(TunnelSettings(kind=TunnelKind.GRETAP, mtu=9000), 9050)
    assert gretap.setup_commands(lab(Topology.SITE_TO_SITE), "gwa", spec)[3:5] == ["mtu", "9000"]


def test_device_names_fit_the_kernels_15_characters():
    for kind in KERNEL_LINKS:
        for role in ("client", "gw", "gwa", "gwb"):
            assert len(kernel_link(kind).device(lab(Topology.ROAD_WARRIOR), role)) <= 15


# --- the whole set-up: device, addresses, routes ---


def test_gre_road_warrior_setup_routes_the_lan_through_the_tunnel():
    assert recorded_setup(TunnelKind.GRE, Topology.ROAD_WARRIOR) == {
        "client": [
            ["link", "add", "tbk1a2b3-grect", "mtu", "1476", "type", "gre",
             "remote", "198.18.0.2", "local", "198.18.0.1", "dev", "tbk1a2b3-gw"],
            ["link", "set", "tbk1a2b3-grect", "mtu", "1476", "up"],
            ["address", "add", "198.19.0.1/24", "dev", "tbk1a2b3-grect"],
            ["route", "add", "198.18.1.0/24", "dev", "tbk1a2b3-grect"],
            ["address", "add", "2001:2:0:ff::1/64", "dev", "tbk1a2b3-grect", "nodad"],
            ["route", "add", "2001:2:0:1::/64", "dev", "tbk1a2b3-grect"],
        ],
        "gw": [  # the gateway is attached to both of its links: no route to add
            ["link", "add", "tbk1a2b3-gregw", "mtu", "1476", "type", "gre",
             "remote", "198.18.0.1", "local", "198.18.0.2", "dev", "tbk1a2b3-client"],
            ["link", "set", "tbk1a2b3-gregw", "mtu", "1476", "up"],
            ["address", "add", "198.19.0.2/24", "dev", "tbk1a2b3-gregw"],
            ["address", "add", "2001:2:0:ff::2/64", "dev", "tbk1a2b3-gregw", "nodad"],
        ],
    }  # fmt: skip


def test_gretap_site_to_site_routes_via_the_far_ends_inner_address():
    # An L2 tunnel: the next hop's MAC address is found by ARP/ND across the tunnel.
    assert recorded_setup(TunnelKind.GRETAP, Topology.SITE_TO_SITE) == {
        "gwa": [
            ["link", "add", "tbk1a2b3-gtapga", "mtu", "1462", "type", "gretap",
             "remote", "198.18.1.2", "local", "198.18.1.1", "dev", "tbk1a2b3-gwb"],
            ["link", "set", "tbk1a2b3-gtapga", "mtu", "1462", "up"],
            ["address", "add", "198.19.0.1/24", "dev", "tbk1a2b3-gtapga"],
            ["route", "add", "198.18.2.0/24", "via", "198.19.0.2", "dev", "tbk1a2b3-gtapga"],
            ["address", "add", "2001:2:0:ff::1/64", "dev", "tbk1a2b3-gtapga", "nodad"],
            ["route", "add", "2001:2:0:2::/64", "via", "2001:2:0:ff::2",
             "dev", "tbk1a2b3-gtapga"],
        ],
        "gwb": [
            ["link", "add", "tbk1a2b3-gtapgb", "mtu", "1462", "type", "gretap",
             "remote", "198.18.1.1", "local", "198.18.1.2", "dev", "tbk1a2b3-gwa"],
            ["link", "set", "tbk1a2b3-gtapgb", "mtu", "1462", "up"],
            ["address", "add", "198.19.0.2/24", "dev", "tbk1a2b3-gtapgb"],
            ["route", "add", "198.18.0.0/24", "via", "198.19.0.1", "dev", "tbk1a2b3-gtapgb"],
            ["address", "add", "2001:2:0:ff::2/64", "dev", "tbk1a2b3-gtapgb", "nodad"],
            ["route", "add", "2001:2:0:0::/64", "via", "2001:2:0:ff::1",
             "dev", "tbk1a2b3-gtapgb"],
        ],
    }  # fmt: skip


def test_ipip_gets_no_ipv6_address_or_route():
    # IPv6 routed into an ipip device would be dropped as a transmit error; without a
    # route it is refused at once (and traffic.family = 6 is refused before any lab).
    sent = recorded_setup(TunnelKind.IPIP, Topology.SITE_TO_SITE)
    assert sent["gwa"][1:] == [
        ["link", "set", "tbk1a2b3-ipipga", "mtu", "1480", "up"],
        ["address", "add", "198.19.0.1/24", "dev", "tbk1a2b3-ipipga"],
        ["route", "add", "198.18.2.0/24", "dev", "tbk1a2b3-ipipga"],
    ]
    assert sent["gwb"][1:] == [
        ["link", "set", "tbk1a2b3-ipipgb", "mtu", "1480", "up"],
        ["address", "add", "198.19.0.2/24", "dev", "tbk1a2b3-ipipgb"],
        ["route", "add", "198.18.0.0/24", "dev", "tbk1a2b3-ipipgb"],
    ]


def test_geneve_road_warrior_setup():
    assert recorded_setup(TunnelKind.GENEVE, Topology.ROAD_WARRIOR) == {
        "client": [
            ["link", "add", "tbk1a2b3-gnvct", "mtu", "1450", "type", "geneve",
             "id", "42", "remote", "198.18.0.2", "dstport", "6081"],
            ["link", "set", "tbk1a2b3-gnvct", "mtu", "1450", "up"],
            ["address", "add", "198.19.0.1/24", "dev", "tbk1a2b3-gnvct"],
            ["route", "add", "198.18.1.0/24", "via", "198.19.0.2", "dev", "tbk1a2b3-gnvct"],
            ["address", "add", "2001:2:0:ff::1/64", "dev", "tbk1a2b3-gnvct", "nodad"],
            ["route", "add", "2001:2:0:1::/64", "via", "2001:2:0:ff::2",
             "dev", "tbk1a2b3-gnvct"],
        ],
        "gw": [
            ["link", "add", "tbk1a2b3-gnvgw", "mtu", "1450", "type", "geneve",
             "id", "42", "remote", "198.18.0.1", "dstport", "6081"],
            ["link", "set", "tbk1a2b3-gnvgw", "mtu", "1450", "up"],
            ["address", "add", "198.19.0.2/24", "dev", "tbk1a2b3-gnvgw"],
            ["address", "add", "2001:2:0:ff::2/64", "dev", "tbk1a2b3-gnvgw", "nodad"],
        ],
    }  # fmt: skip


# --- overheads, default MTUs, and the ceiling model agreeing ---


@pytest.mark.parametrize(
    ("kind", "overhead", "mtu", "layer2", "families"),
    [
        (TunnelKind.GRE, 20 + 4, 1476, False, (4, 6)),
        (TunnelKind.GRETAP, 20 + 4 + 14, 1462, True, (4, 6)),
        (TunnelKind.IPIP, 20, 1480, False, (4,)),
        (TunnelKind.GENEVE, 20 + 8 + 8 + 14, 1450, True, (4, 6)),
    ],
)
def test_overhead_default_mtu_and_what_it_carries(kind, overhead, mtu, layer2, families):
    tunnel, spec = TUNNELS.get(kind), TunnelSpec("kernel")
    assert tunnel.overhead(spec, 4) == overhead
    assert tunnel.default_mtu(1500, spec) == mtu
    assert tunnel.resolve(TunnelSettings(kind=kind), 1500) == TunnelSpec("kernel", mtu=mtu)
    assert (tunnel.layer2, tunnel.families) == (layer2, families)
    assert tunnel.implementations == ("kernel",)
    assert tunnel.version("kernel").startswith("linux ")
    assert tunnel.programs("kernel") == []


def test_every_lab_tunnel_agrees_with_the_ceiling_model():
    """A tunnel's overhead and default MTU are the ceiling model's, so a shaped run's
    ceiling describes the tunnel the lab really built."""
    spec = TunnelSpec("kernel")
    for kind in TUNNELS.kinds():
        tunnel = TUNNELS.get(kind)
        encapsulation = tunnel.encapsulation
        if kind is TunnelKind.NONE:
            continue
        assert encapsulation is not None, kind
        assert tunnel.overhead(spec, 4) == sum(size for _, size in fields(encapsulation, 4))
        for link_mtu in (1500, 9000):
            assert tunnel.default_mtu(link_mtu, spec) == default_tunnel_mtu(
                encapsulation, link_mtu, inner_family=4, outer_family=4
            ), kind


def test_none_of_them_encrypts_and_only_gre_and_gretap_are_protectable():
    for kind in KERNEL_LINKS:
        assert TUNNELS.get(kind).ciphers == ()
        if kind in (TunnelKind.GRE, TunnelKind.GRETAP):
            continue
        with pytest.raises(UserError) as caught:
            TUNNELS.get(kind).resolve(TunnelSettings(kind=kind, protection=Protection.IPSEC), 1500)
        assert str(caught.value).startswith(f"tunnel.protection: {kind.value} cannot be wrapped")


# --- what this VM's kernel says, and the reasons a configuration is skipped ---


@pytest.mark.parametrize("kind", KERNEL_LINKS)
def test_the_captured_probe_is_the_probes_command_and_refused(kind):
    captured = COMMANDS[f"link-{kind.value}-unknown"]
    args = c.link_probes()[kind.value]
    assert captured["argv"][3:] == probing.link_probe_argv(kind.value, args)
    assert captured["returncode"] == 2
    assert probing.refusal(captured["stderr"]) == "Unknown device type"


YES = Check(True)
VM = Capabilities(
    kernel="6.18.44-fc-v669",
    euid=0,
    netns=Check(True, "as root"),
    links={
        **{kind: YES for kind in c.link_probes()},
        **{
            kind.value: Check(
                False, probing.refusal(COMMANDS[f"link-{kind.value}-unknown"]["stderr"])
            )
            for kind in KERNEL_LINKS
        },
    },
    qdiscs={"pfifo": YES, "tbf": YES, "htb": YES},
    esp={},
    congestion=Congestion(True, "reno bbr cubic", ("reno", "bbr", "cubic"), (), "bbr"),
    cgroup=CgroupCpu(True, "cgroup v1 at /sys/fs/cgroup/cpu", version=1, path="/sys/fs/cgroup/cpu"),
    programs={
        name: Program(True, f"{name} 1.0", path=f"/usr/bin/{name}", version=f"{name} 1.0")
        for name in c.program_names()
    },
    cpus=(0, 1),
    pppoe=Check(False, "no PPPoE in this kernel (a PPPoE socket: Address family not supported)"),
)
FULL = replace(VM, links={kind: YES for kind in VM.links})


def trial(kind: TunnelKind, family: int = 4, **lab: object) -> TrialConfig:
    return TrialConfig(
        lab=LabSettings(**lab),  # type: ignore[arg-type]
        tunnel=TunnelSettings(kind=kind),
        traffic=TrafficSettings(family=family),
    )


@pytest.mark.parametrize("kind", KERNEL_LINKS)
@pytest.mark.parametrize("topology", list(Topology))
def test_a_kernel_without_the_link_type_skips_with_its_refusal(kind, topology):
    reason = f"tunnel.kind: {kind.value} links cannot be created here (Unknown device type)"
    assert skips.unmet(trial(kind, topology=topology), VM) == reason
    assert skips.unmet(trial(kind, topology=topology), FULL) is None


def test_ipv6_traffic_through_ipip_is_refused_on_any_machine_and_named_first():
    reason = (
        "traffic.family: ipip carries IPv4 only, not IPv6; use traffic.family = 4 or a "
        "tunnel kind that carries IPv6 (wireguard, vxlan, gre, gretap, sit, geneve, openvpn, ipsec)"
    )
    # Named before the missing link type: no kernel would make this configuration run.
    assert skips.unmet(trial(TunnelKind.IPIP, family=6), VM) == reason
    assert skips.unmet(trial(TunnelKind.IPIP, family=6), FULL) == reason
    assert skips.unmet(trial(TunnelKind.IPIP, family=4), FULL) is None
    for kind in (TunnelKind.GRE, TunnelKind.GRETAP, TunnelKind.GENEVE):
        assert skips.unmet(trial(kind, family=6), FULL) is None


def test_a_link_type_that_could_not_be_probed_is_never_a_reason():
    blind = replace(VM, links={kind: Check(None, "not permitted") for kind in VM.links})
    for kind in KERNEL_LINKS:
        assert skips.unmet(trial(kind), blind) is None


def test_doctor_lists_each_kind_with_the_kernels_refusal():
    # On a kernel that loads modules (this VM's cannot: tests/unit/test_doctor.py).
    report = doctor.collect(VM, Check(True, "loads modules"))
    for kind in KERNEL_LINKS:
        assert report.to_json()["tunnels"][kind.value] == {
            "status": "no",
            "detail": "Unknown device type",
            "hint": f"modprobe {TUNNELS.get(kind).kernel_module}",
        }
    lines = doctor.render(report).splitlines()
    assert (
        "link gretap                  no      Unknown device type; to get it: modprobe ip_gre"
        in lines
    )
