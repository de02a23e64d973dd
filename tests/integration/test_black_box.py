"""A router tunnelbench cannot log into (RouterOS, pfSense): measured as a black box
between the client and the server, its counters read over SNMP from a real net-snmp
agent in the router's namespace (tests/snmpd.py). The router runs no sshd at all; the
client and server are real sshd "machines" (tests/sshd.py). The agent's figures are held
against the router's own kernel counters, read beside it."""

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.helpers import latest, remote, tunnelbench
from tests.snmpd import Snmpd
from tests.sshd import SshdHosts
from tunnelbench.lab import netns
from tunnelbench.model.plan import LabSettings

COMMUNITY = "tb-read-7f3a"


@dataclass
class BlackBoxHosts:
    lab: netns.Lab
    farm: SshdHosts
    agent: Snmpd
    work: Path

    def file(self, name: str, router: str) -> Path:
        path = self.work / name
        path.write_text(
            f'ssh_config = "{self.farm.ssh_config}"\nconnect_timeout = 3\n'
            f'[client]\nssh = "client"\n[gw]\naddress = "198.18.0.2"\n{router}'
            '[server]\nssh = "server"\naddress = "198.18.1.2"\n'
        )
        return path

    def snmp_router(self, community: str = COMMUNITY) -> str:
        return f'snmp = "{self.agent.agent}"\ncommunity = "{community}"\n'


@pytest.fixture(scope="module")
def boxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BlackBoxHosts]:
    """client - gw - server; sshd on the client and the server only, snmpd on gw."""
    work = tmp_path_factory.mktemp("blackbox")
    lab = netns.build(LabSettings(), tunnel=False)
    try:
        ends = {r: lab.ns(r) for r in ("client", "server")}
        with (
            SshdHosts(work / "ssh", ends, busybox=frozenset({"server"})) as farm,
            Snmpd(work / "snmpd", lab.ns("gw"), COMMUNITY) as agent,
        ):
            yield BlackBoxHosts(lab, farm, agent, work)
    finally:
        lab.teardown()


def kernel_counter(lab: netns.Lab, device: str, name: str) -> int:
    argv = [
        "ip",
        "netns",
        "exec",
        lab.ns("gw"),
        "cat",
        f"/sys/class/net/{device}/statistics/{name}",
    ]
    return int(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)


def test_hosts_check_names_the_black_box_and_what_its_agent_serves(boxed):
    done = tunnelbench("hosts", "check", str(boxed.file("check.toml", boxed.snmp_router())))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "gw (DUT): no ssh: measured as a black box between the client and the server" in out
    assert f"  SNMP {boxed.agent.agent}: Linux " in out  # the agent's sysDescr
    # the router's own interfaces, as its agent lists them (lo left out)
    devices = [boxed.lab.link_device("gw", peer) for peer in ("client", "server")]
    listed = next(line for line in out.splitlines() if line.startswith("  interfaces up: "))
    assert sorted(listed.removeprefix("  interfaces up: ").split(", ")) == sorted(devices)
    assert "CPU: the whole box's time (UCD-SNMP-MIB ssCpuRaw*, " in out
    assert "connected to 2 hosts in " in out
    # the community is a credential: never printed
    assert COMMUNITY not in out + done.stderr


def test_a_wrong_community_is_one_clear_message(boxed):
    started = time.monotonic()
    path = boxed.file("wrong.toml", boxed.snmp_router("not-the-community"))
    done = tunnelbench("hosts", "check", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"tunnelbench: error: gw.snmp: SNMP agent {boxed.agent.agent}:")
    assert "community right?" in done.stderr and "Traceback" not in done.stderr
    assert "not-the-community" not in done.stderr
    assert time.monotonic() - started < 20


def test_a_black_box_at_the_labs_full_rate_is_read_over_snmp_through_its_agents_delays(boxed):
    """Unshaped, at the lab's full rate (tens of Gbit/s on a quiet machine): no false
    failure. The agent is polled through the trial, its refresh intervals measured; the
    closing counts come from its first refresh after the traffic; its byte count of the
    router's server-side port lies between what iperf3 says arrived and what the router's
    kernel counted, unless the agent discarded refreshes (net-snmp's 32-bit wrap check
    drops an update of more than 4 GiB), which is then counted and that byte count left
    out; the CPU share is every core's between two refreshes within the traffic, its
    span close to the window's."""
    work = boxed.work / "run"
    work.mkdir()
    devices = {peer: boxed.lab.link_device("gw", peer) for peer in ("client", "server")}
    kernel_before = {p: kernel_counter(boxed.lab, d, "tx_bytes") for p, d in devices.items()}
    done = tunnelbench(
        "run", "--hosts", str(boxed.file("run.toml", boxed.snmp_router())), "--duration", "10",
        "--runs", "1", "--streams", "1", "--db", str(work / "r.db"), "-q",
        cwd=work,
    )  # fmt: skip
    kernel_after = {p: kernel_counter(boxed.lab, d, "tx_bytes") for p, d in devices.items()}
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = latest(work / "r.db")
    (trial,) = run.trials
    m = trial.metrics
    rate = f"{m['goodput_bps'] / 1e9:.1f} Gbit/s"
    delivered = m["goodput_bps"] * 10 / 8
    kernel = kernel_after["server"] - kernel_before["server"]
    # the agent's refreshes, measured: its interface table and its CPU counters
    refresh, cpu_refresh = m["snmp.gw.if_refresh_s"], m["snmp.gw.cpu_refresh_s"]
    assert 0.5 <= refresh <= 20 and 0.5 <= cpu_refresh <= 20, (m, rate)
    assert 0 <= m["snmp.gw.close_delay_s"] <= refresh + 1, (m, rate)
    towards_server = f"link.gw.{devices['server']}.tx_bytes"
    if m.get("snmp.gw.discarded_refreshes"):
        assert towards_server not in m, (m, rate)
        assert "discarded" in done.stderr and "did not cross" not in done.stderr
    else:
        assert delivered <= m[towards_server] <= kernel, (delivered, m, kernel, rate)
    assert m[f"link.gw.{devices['server']}.tx_packets"] > 0
    # the whole box's CPU over the window: a span of the agent's own clock close to it
    window, covered = m["snmp.gw.window_s"], m["snmp.gw.cpu_covered_s"]
    assert window - 1.5 * cpu_refresh - 1 <= covered <= window + cpu_refresh / 2 + 1, (m, rate)
    assert 0 < m["snmp.gw.cpu_busy_pct"] <= 100
    seen = remote(trial)
    assert seen.dut_view == "snmp" and seen.dut_snmp is not None
    assert list(seen.dut_snmp.interfaces) == sorted(devices.values())
    assert not any(n.startswith("cpu") for n in m)  # nothing of its cores one by one
    (summary,) = run.summaries
    assert summary.diagnosis is not None
    verdict = summary.diagnosis.verdict
    if m["snmp.gw.cpu_busy_pct"] >= 90:  # the lab's router shares 2 cores with iperf3
        said = f"the DUT gw (read over SNMP, no login) was {m['snmp.gw.cpu_busy_pct']:.0f}% busy"
        assert verdict.summary.startswith(said), verdict
    else:
        assert "the DUT gw is a black box (no login)" in verdict.summary, verdict
    report = " ".join((work / "r-run1.md").read_text().split())  # its lines wrap
    assert COMMUNITY not in report
    assert f"gw = DUT (a black box, no login: its SNMP agent `{boxed.agent.agent}`)" in report
