"""A router without a login, without the router: its hosts file, net-snmp's output as
read, the window's counters (the 32-bit ones unwrapped), the CPU share only where the
agent's cache cannot have placed the span outside the window, and the verdicts that say
what could not be seen."""

from pathlib import Path
from typing import Any

import pytest

from tests.report_fixtures import resolved_for
from tunnelbench.analysis.advice import advise
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose
from tunnelbench.bench.testbeds import hosts_figures
from tunnelbench.errors import LabError, UserError
from tunnelbench.model.environment import Environment
from tunnelbench.model.hostsrecord import Controller, RemoteRecord
from tunnelbench.model.plan import TrialConfig
from tunnelbench.remote import hostsfile, probes, snmp
from tunnelbench.remote.session import BlackBox, Session
from tunnelbench.report.markdown import hosts_line

BOX = """
[client]
ssh = "client"
[gw]
address = "192.168.88.1"
snmp = "udp:192.168.88.1:161"
community = "tb-read"
[server]
ssh = "server"
address = "198.18.1.2"
"""


def parse(text: str) -> hostsfile.HostsFile:
    return hostsfile.parse(text, Path("/tmp/hosts.toml"))


def test_a_router_without_ssh_is_a_black_box_with_its_agent():
    hosts = parse(BOX)
    gw = hosts.hosts["gw"]
    assert gw.black_box and gw.snmp == snmp.Agent("udp:192.168.88.1:161")
    assert gw.community == "tb-read" and gw.snmp_cache == hostsfile.SNMP_CACHE_S
    assert hosts.logins == ("client", "server")
    recorded = hosts.record().to_json()["hosts"]["gw"]
    assert recorded == {"ssh": None, "address": "192.168.88.1", "snmp": "udp:192.168.88.1:161"}
    assert "tb-read" not in repr(hosts)  # the community is never shown
    assert not parse(BOX.replace('snmp = "udp:192.168.88.1:161"\ncommunity = "tb-read"\n', ""))\
        .hosts["gw"].snmp  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BOX.replace('ssh = "client"', ""), "client.ssh: missing"),
        (BOX.replace('community = "tb-read"\n', ""), "gw.community: missing"),
        (BOX.replace('snmp = "udp:192.168.88.1:161"\n', ""), "gw.snmp: missing"),
        (BOX.replace("udp:192", "sctp:192"), "gw.snmp: 'sctp:192.168.88.1:161': transport"),
        (BOX.replace('"udp:192.168.88.1:161"', '"unix:agent.sock"'), "absolute path"),
        (BOX.replace('"udp:192.168.88.1:161"', "161"), "gw.snmp: 161 is not an SNMP agent"),
        (BOX + "[gw.extra]\n", "gw.extra: unknown key"),
        (BOX.replace('community = "tb-read"', 'community = "tb-read"\nsnmp_cache = 90'),
         "gw.snmp_cache: 90 is out of range; allowed 0..60 s"),
        (BOX.replace('ssh = "server"', 'ssh = "server"\nsnmp = "10.0.0.1"\ncommunity = "x"'),
         "server.snmp: only a router's counters are read over SNMP"),
        (BOX + '[tunnel]\nmode = "build"\nkind = "wireguard"\nvia = "198.18.1.1"\n',
         "gw.ssh: missing: tunnelbench builds the tunnel on gw"),
    ],
)  # fmt: skip
def test_a_bad_black_box_is_one_message_naming_the_key(text, message):
    with pytest.raises(UserError, match=r"^/tmp/hosts\.toml: ") as caught:
        parse(text)
    assert message in str(caught.value)
    assert "tb-read" not in str(caught.value)


# What net-snmp 5.9's snmpget printed for a router's agent (-On -OQ -Oe).
ANSWER = """\
.1.3.6.1.2.1.1.1.0 = "RouterOS RB5009UG+S+"
.1.3.6.1.2.1.31.1.1.1.10.2 = 123456789012
.1.3.6.1.2.1.2.2.1.19.2 = 4294967290
.1.3.6.1.4.1.2021.11.61.0 = No Such Object available on this agent at this OID
.1.3.6.1.2.1.25.3.3.1.2.196608 = No Such Instance currently exists at this OID
"""


def test_net_snmps_answers_are_read_with_absent_variables_left_out():
    assert snmp.parse(ANSWER) == {
        ".1.3.6.1.2.1.1.1.0": "RouterOS RB5009UG+S+",
        ".1.3.6.1.2.1.31.1.1.1.10.2": "123456789012",
        ".1.3.6.1.2.1.2.2.1.19.2": "4294967290",
    }


DEVICE = snmp.Device("RouterOS", {"2": "ether1", "3": "ether2"}, cpu_counters=True, cores=4)


def test_the_window_unwraps_32_bit_counters_and_keeps_64_bit_ones():
    first = snmp.Snapshot(0.0, {"2": {"tx_bytes": 1_000, "tx_dropped": 4_294_967_290}})
    last = snmp.Snapshot(3.0, {"2": {"tx_bytes": 2**40, "tx_dropped": 5}})
    found = snmp.link_metrics("gw", DEVICE, first, last)
    assert found == {"link.gw.ether1.tx_bytes": 2**40 - 1_000, "link.gw.ether1.tx_dropped": 11}


def ticks(idle: int, user: int, softirq: int) -> dict[str, int]:
    return {"idle": idle, "user": user, "softirq": softirq, "system": 0}


def test_the_cpu_share_is_every_cores_time_between_two_refreshes():
    # 4 cores, 12 s: 4,800 ticks, 1,200 of them idle -> 75% busy, softirq 50%
    first = snmp.Snapshot(0.0, cpu=ticks(1_000, 1_000, 1_000))
    last = snmp.Snapshot(12.0, cpu=ticks(2_200, 2_200, 3_400))
    found = snmp.cpu_metrics("gw", DEVICE, first, last)
    assert found == {
        "snmp.gw.cpu_covered_s": 12.0,
        "snmp.gw.cpu_busy_pct": 75.0,
        "snmp.gw.cpu_softirq_pct": 50.0,
    }
    # counters that did not move (no refresh in between): nothing
    assert snmp.cpu_metrics("gw", DEVICE, first, first) == {}


def box(metrics: dict[str, float], remote: dict[str, Any]) -> Subject:
    config = TrialConfig()
    resolved = resolved_for(config, {"remote": {"dut": "gw"} | remote})
    found = {"goodput_bps": 4.1e8} | metrics
    return Subject(config, resolved, found, 9.4e8, Environment(), runs=(found,))


SNMP_VIEW = {"dut_view": "snmp", "dut_snmp": {"cores": 4, "cache_s": 5.0}}


def test_a_black_box_busy_on_every_core_is_cpu_bound_by_its_agents_count():
    subject = box({"snmp.gw.cpu_busy_pct": 96.0, "snmp.gw.cpu_covered_s": 11.0}, SNMP_VIEW)
    d = diagnose(subject)
    assert d.verdict.bound is Bound.CPU
    # the advice for a DUT's cores finds none to name (it crashed on max() of no cores),
    # and with every core busy together more flows have no core to go to
    assert [a.setting for a in advise(subject, d, [])] == []
    assert d.verdict.summary == (
        "the DUT gw (read over SNMP, no login) was 96% busy on every core together over the"
        " 11.0 s its agent's counters covered: its CPU held the traffic"
    )


@pytest.mark.parametrize(
    ("metrics", "remote", "says"),
    [
        ({"snmp.gw.cpu_busy_pct": 27.0}, SNMP_VIEW,
         "; over SNMP every core together was 27% busy; one saturated core of its 4 would"
         " read 25%"),
        ({"snmp.gw.cpu_covered_s": 4.9}, SNMP_VIEW,
         "; its SNMP CPU counters covered 4.9 s, which an agent's cache of up to 5 s cannot"
         " place inside the window (a CPU figure needs 10 s or more: a longer"
         " traffic.duration)"),
        ({}, {"dut_view": "none"},
         "; give its SNMP agent (snmp, community) to read its counters"),
    ],
)  # fmt: skip
def test_what_could_not_be_seen_of_a_black_box_is_said(metrics, remote, says):
    d = diagnose(box(metrics, remote))
    assert d.verdict.bound is Bound.UNDETERMINED
    assert d.verdict.summary.endswith(
        "; the DUT gw is a black box (no login): its per-core CPU, processes and queues could"
        " not be seen" + says
    ), d.verdict.summary


def test_a_dut_logged_into_is_not_called_a_black_box():
    d = diagnose(box({}, {"dut_view": "ssh"}))
    assert "black box" not in d.verdict.summary


def test_the_reports_hosts_line_names_the_black_box_and_its_agent():
    client = probes.parse_facts("kernel 6.1.0\nmachine x86_64\ncores 4\n").record()
    remote = RemoteRecord(parse(BOX).record(), {"client": client}, Controller("6.1.0", 1))
    line = hosts_line(remote)
    assert "gw = DUT (a black box, no login: its SNMP agent `udp:192.168.88.1:161`)" in line
    assert line.startswith("client (`client`: kernel 6.1.0, 4 cores)")
    assert "server (`server`: kernel ?, ? cores)" in line  # its facts were not recorded
    assert line.endswith("tunnel: none (the lab settings do not apply to real hosts)")


def black_box_session() -> Session:
    session = Session(parse(BOX))
    session.black_boxes["gw"] = BlackBox("gw")
    return session


# The trial at ~30 Gbit/s for 12 s: iperf3 45.0 GB arrived, the router's kernel
# sent 51.0 GB towards the server, its agent's ifHCOutOctets rose 6.0 GB.
AT_30G = {
    "goodput_bps": 30e9,
    "upload_bps": 30e9,
    "link.server.eth0.rx_bytes": 51.0e9,
    "link.client.eth0.rx_bytes": 0.9e9,
    "link.gw.ether2.tx_bytes": 6.0e9,
    "link.gw.ether2.tx_packets": 1.1e6,
    "link.gw.ether1.tx_bytes": 0.8e9,
    "link.gw.ether1.tx_packets": 0.6e6,
}


def test_a_stale_agent_is_not_a_route_that_bypassed_the_router():
    metrics = dict(AT_30G)
    hosts_figures.check_counters(black_box_session(), metrics, 12)
    # the agent's byte counts, short of two instruments, are left out; its packets stay
    assert not any(n.startswith("link.gw.") and n.endswith("_bytes") for n in metrics)
    assert metrics["link.gw.ether2.tx_packets"] == 1.1e6
    # refreshes the agent discarded: their interface's bytes are already out, the rest kept
    found = {k: v for k, v in AT_30G.items() if k != "link.gw.ether2.tx_bytes"}
    found["snmp.gw.discarded_refreshes"] = 3.0
    hosts_figures.check_counters(black_box_session(), found, 12)
    assert found["link.gw.ether1.tx_bytes"] == 0.8e9


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # the agent's packets too few for the bytes even as 512 KiB aggregates
        ({"link.gw.ether2.tx_packets": 80_000.0, "link.gw.ether1.tx_packets": 10.0},
         "gw's SNMP agent counted 80,000 packets out of gw's busiest interface, too few for"
         " the 45,000,000,000 bytes the generator reports arrived (and the ends' kernels"
         " received) even as 512 KiB aggregates: the traffic did not cross gw, or its agent"
         " miscounts"),
        # the server's own kernel disagrees with the generator: the agent is not blamed
        ({"link.server.eth0.rx_bytes": 40e9},
         "the server's kernel counted 40,000,000,000 bytes received on its busiest interface,"
         " fewer than the 45,000,000,000 the generator reports arrived there"),
    ],
)  # fmt: skip
def test_each_disagreement_names_the_instruments_that_disagree(change, message):
    with pytest.raises(LabError) as caught:
        hosts_figures.check_counters(black_box_session(), AT_30G | change, 12)
    assert str(caught.value).startswith(message)
