"""sit (6in4): the kind added to prove a kind lives in its module and one registry line.

Its exact commands, its facts and its refusals; the integration test in test_lab runs it
where the kernel has sit links (this VM's kernel has none: it is skipped there with the
kernel's refusal).
"""

from tests.unit.probe_fixtures import lab_like
from tunnelbench.bench import capabilities, skips
from tunnelbench.kinds import Topology, TunnelKind
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.model.plan import LabSettings, TrialConfig, TunnelSettings
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.kernel_link import KernelLinkTunnel

SIT = TUNNELS.get(TunnelKind.SIT)


def test_sit_is_ipv6_over_the_wan_ipv4_addresses_with_a_20_byte_header():
    assert isinstance(SIT, KernelLinkTunnel)
    spec = SIT.resolve(TunnelSettings(kind=TunnelKind.SIT), 1500)
    assert spec.mtu == 1480 and SIT.overhead(spec, 4) == 20
    built = lab_like("k1a2b3", LabSettings(topology=Topology.SITE_TO_SITE))
    assert SIT.setup_commands(built, "gwa", spec) == [
        "link", "add", "tbk1a2b3-sitga", "mtu", "1480", "type", "sit",
        "remote", "198.18.1.2", "local", "198.18.1.1", "dev", "tbk1a2b3-gwb",
    ]  # fmt: skip


def test_sit_gets_only_ipv6_addresses_and_routes():
    built = lab_like("k1a2b3", LabSettings(topology=Topology.SITE_TO_SITE))
    sent: list[list[str]] = []
    built.ip_batch = lambda role, commands: sent.extend(commands)  # type: ignore[method-assign]
    spec = SIT.resolve(TunnelSettings(kind=TunnelKind.SIT), 1500)
    SIT.setup(built, spec)
    addresses = [line[2] for line in sent if line[:2] == ["address", "add"]]
    assert addresses and all(":" in address for address in addresses)
    routes = [line[2] for line in sent if line[:2] == ["route", "add"]]
    assert routes and all(":" in route for route in routes)


def test_sit_declares_its_facts_and_its_probe():
    spec = SIT.resolve(TunnelSettings(kind=TunnelKind.SIT), 1500)
    facts = SIT.facts(spec)
    assert (facts.encrypts, facts.userspace, facts.implementations) == (False, False, ("kernel",))
    assert facts.wire is not None and facts.wire.encapsulation is Encapsulation.IPIP
    assert capabilities.link_probes()["sit"] == ("remote", "198.18.0.2", "local", "198.18.0.1")
    assert "sit" in capabilities.link_probes()


def test_ipv4_through_sit_is_refused_on_any_machine():
    config = TrialConfig.from_dict({"tunnel": {"kind": "sit"}, "traffic": {"family": 4}})
    reason = skips.unmet(config, capabilities.probe())
    assert reason is not None and reason.startswith(
        "traffic.family: sit carries IPv6 only, not IPv4; use traffic.family = 6"
    )
