"""Offloads, sysctls and link state set and read by a thread inside a lab namespace
(system.netdev through NetnsHost), held against what ethtool, sysctl and ip show of the
same namespace, and against the command-line path every other host takes."""

import json
import time
from pathlib import Path

import pytest

from tunnelbench.errors import LabError
from tunnelbench.lab import netns
from tunnelbench.lab.host import Host, NetnsHost
from tunnelbench.model.plan import LabSettings


@pytest.fixture
def lab():
    built = netns.build(LabSettings())
    try:
        yield built
    finally:
        built.teardown()


def _ethtool_shows(lab: netns.Lab, role: str, device: str) -> dict[str, bool]:
    text = lab.exec(role, ["ethtool", "-k", device]).stdout
    names = {
        "tcp-segmentation-offload": "tso",
        "generic-segmentation-offload": "gso",
        "generic-receive-offload": "gro",
    }
    shown = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in names:
            shown[names[name.strip()]] = value.split()[0] == "on"
    return shown


class _Commands(NetnsHost):
    """The same namespace through :class:`Host`'s own command-line forms (what a host
    with no thread of ours inside it, an SSH host, runs)."""

    set_sysctls = Host.set_sysctls
    set_offloads = Host.set_offloads
    links_up = Host.links_up


def _by_commands(host: NetnsHost) -> Host:
    return _Commands(host.name, host.state)


@pytest.mark.parametrize("path", ["thread", "commands"])
def test_offloads_set_either_way_are_what_ethtool_then_shows(lab, path):
    host = lab.host("client")
    setter = host if path == "thread" else _by_commands(host)
    device = lab.link_device("client", "gw")
    for on in (False, True, False):
        wanted = {"tso": on, "gso": on, "gro": not on}
        setter.set_offloads(device, wanted)
        assert _ethtool_shows(lab, "client", device) == wanted


@pytest.mark.parametrize("path", ["thread", "commands"])
def test_a_change_the_device_does_not_take_is_named(lab, path):
    # A TUN device's segmentation stays off until the process behind it offers it
    # (TUNSETOFFLOAD): with nobody behind it, "tso on" is not taken.
    host = lab.host("client")
    setter = host if path == "thread" else _by_commands(host)
    lab.exec("client", ["ip", "tuntap", "add", "dev", "tbtun0", "mode", "tun"])
    try:
        with pytest.raises(
            LabError, match=r"offloads of tbtun0 .* did not apply: .*tx-tcp-segmentation"
        ):
            setter.set_offloads("tbtun0", {"tso": True})
        assert _ethtool_shows(lab, "client", "tbtun0")["tso"] is False
    finally:
        lab.exec("client", ["ip", "tuntap", "del", "dev", "tbtun0", "mode", "tun"])


def test_sysctls_are_the_namespaces_and_only_net_keys_are_taken(lab):
    host_forwarding = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    host_name = Path("/proc/sys/kernel/hostname").read_text()
    client = lab.host("client")
    shown = lab.exec("client", ["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip()
    assert shown == "0"  # a client is no router
    client.set_sysctls({"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.forwarding": "1"})
    shown = lab.exec(
        "client", ["sysctl", "-n", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"]
    ).stdout.split()
    assert shown == ["1", "1"]
    with pytest.raises(ValueError, match=r"kernel\.hostname"):
        client.set_sysctls({"kernel.hostname": "changed-by-a-lab"})
    # The machine's own values never moved.
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == host_forwarding
    assert Path("/proc/sys/kernel/hostname").read_text() == host_name


def test_a_link_is_up_until_its_peer_goes_down(lab):
    client, gw = lab.host("client"), lab.host("gw")
    device, peer = lab.link_device("client", "gw"), lab.link_device("gw", "client")
    assert client.links_up([device]) and gw.links_up([peer])
    assert _by_commands(client).links_up([device])
    lab.exec("gw", ["ip", "link", "set", "dev", peer, "down"])
    assert not client.links_up([device])
    assert not _by_commands(client).links_up([device])
    state = json.loads(lab.exec("client", ["ip", "-j", "link", "show", device]).stdout)
    assert state[0]["operstate"] != "UP"
    with pytest.raises(LabError, match="nosuchdev"):
        client.links_up(["nosuchdev"])


@pytest.mark.parametrize("shaper", ["tbf", "htb"])
def test_the_qdiscs_read_over_rtnetlink_are_what_tc_shows(shaper):
    """Every qdisc of every role, with its counters, after real traffic through a shaped
    WAN (a pfifo leaf under the shaper; this kernel has no netem): the thread's reading
    and ``tc -s -j qdisc show`` of the same namespace, taken while nothing moves, agree
    on every field the probes read."""
    from tunnelbench.kinds import Shaper
    from tunnelbench.model.plan import LinkSettings
    from tunnelbench.probes import qdisc
    from tunnelbench.traffic import waiting

    wan = LinkSettings(rate=50_000_000, shaper=Shaper(shaper), queue_limit=20)
    built = netns.build(LabSettings(wan=wan))
    try:
        server = built.host("server").spawn(["iperf3", "-s", "-1", "-p", "5201"])
        try:
            # A client sent before the server listens is refused (seen in CI).
            deadline = time.monotonic() + 5
            while not waiting.listening(built.host("server"), 5201):
                assert time.monotonic() < deadline, "iperf3 -s did not listen within 5 s"
                time.sleep(0.01)
            built.exec("client", ["iperf3", "-c", built.server_address(4), "-p", "5201",
                                  "-t", "1", "-P", "4"], timeout=20)  # fmt: skip
        finally:
            server.wait(timeout=10)
        time.sleep(0.3)  # the queues drain
        fields = ("kind", "handle", "root", "parent", "dev", *qdisc.COUNTERS.values(),
                  *qdisc.GAUGES.values())  # fmt: skip
        for role in built.chain.roles:
            host = built.host(role)
            shown = json.loads(Host.qdiscs(host))
            read = json.loads(host.qdiscs())
            assert [{k: q.get(k) for k in fields} for q in read] == [
                {k: q.get(k) for k in fields} for q in shown
            ], role
            if role == "client":  # the shaped end: the shaper and its leaf
                kinds = [q["kind"] for q in read if q["dev"] == built.link_device("client", "gw")]
                assert kinds == [shaper, "pfifo"]
                assert any(q["bytes"] > 1_000_000 and q["packets"] > 100 for q in read), read
                if shaper == "tbf":  # its 20-packet leaf overflowed: a count to compare
                    assert any(q["drops"] > 0 for q in read), read
    finally:
        built.teardown()
