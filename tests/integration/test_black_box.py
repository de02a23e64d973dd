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
from tunnelbench.remote import snmp

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


def test_a_black_box_run_reads_its_interfaces_over_snmp_and_says_what_it_cannot_see(boxed):
    work = boxed.work / "run"
    work.mkdir()
    devices = {peer: boxed.lab.link_device("gw", peer) for peer in ("client", "server")}
    kernel_before = {p: kernel_counter(boxed.lab, d, "tx_bytes") for p, d in devices.items()}
    began = time.monotonic()
    done = tunnelbench(
        "run", "--hosts", str(boxed.file("run.toml", boxed.snmp_router())), "--duration", "2",
        "--runs", "1", "--streams", "1", "--db", str(work / "r.db"), "-q", cwd=work,
    )  # fmt: skip
    took = time.monotonic() - began
    kernel_after = {p: kernel_counter(boxed.lab, d, "tx_bytes") for p, d in devices.items()}
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = latest(work / "r.db")
    (trial,) = run.trials
    m = trial.metrics
    delivered = m["goodput_bps"] * 2 / 8
    # The agent's count of the router's server-side port: at least what iperf3 says
    # arrived, at most what the router's kernel counted over the whole command.
    towards_server = m[f"link.gw.{devices['server']}.tx_bytes"]
    kernel = kernel_after["server"] - kernel_before["server"]
    assert delivered <= towards_server <= kernel, (delivered, towards_server, kernel)
    # and the acknowledgements back towards the client, far fewer bytes
    assert 0 < m[f"link.gw.{devices['client']}.tx_bytes"] < towards_server / 10
    # nothing of the router's cores is claimed; a 2 s window is too short for its
    # agent's CPU counters (refreshed every 5 s): their span is recorded, no share
    assert not any(n.startswith("cpu") for n in m)
    assert "snmp.gw.cpu_busy_pct" not in m
    seen = remote(trial)
    assert seen.dut_view == "snmp" and seen.dut_snmp is not None
    assert list(seen.dut_snmp.interfaces) == sorted(devices.values())
    (summary,) = run.summaries
    assert summary.diagnosis is not None
    verdict = summary.diagnosis.verdict
    assert "the DUT gw is a black box (no login)" in verdict.summary, verdict
    # the last read waited out the agent's cache (5 s) after the traffic
    assert took >= 2 + 5
    report = " ".join((work / "r-run1.md").read_text().split())  # its lines wrap
    assert COMMUNITY not in report
    assert f"gw = DUT (a black box, no login: its SNMP agent `{boxed.agent.agent}`)" in report


def test_the_agents_cpu_counters_give_the_whole_box_over_a_long_enough_span(boxed):
    """Two reads of the real agent 15.5 s apart while a core spins, the first once the
    agent's 5 s cache cannot predate the spinner: its counters cover about the span, and
    the whole box is at least the spinner's core busy (one of its cores, in every core's
    time together). A share is claimed only for a span of twice the cache or more."""
    private = boxed.work / "cpu-reader"
    private.mkdir(mode=0o700)
    reader = snmp.Reader(snmp.Agent.parse(boxed.agent.agent), COMMUNITY, private, "gw.snmp")
    device = reader.discover()
    assert device.cpu_counters and device.cores
    spinner = subprocess.Popen(["python3", "-c", "while True: pass"])
    try:
        time.sleep(5.5)
        first = reader.snapshot(device)
        time.sleep(15.5)
        last = reader.snapshot(device)
    finally:
        spinner.kill()
        spinner.wait()
    found = snmp.cpu_metrics("gw", device, first, last, cache=5.0)
    covered = found["snmp.gw.cpu_covered_s"]
    assert 10.5 <= covered <= 20.5, found  # 15.5 s, each end up to 5 s early
    assert found["snmp.gw.cpu_busy_pct"] >= 0.9 * 100 / device.cores, found
    # with a cache longer than half the span, no share is claimed
    longer = covered / 2 + 0.1
    assert "snmp.gw.cpu_busy_pct" not in snmp.cpu_metrics("gw", device, first, last, longer)
