"""Real hosts over SSH, without hosts: the hosts file's validation, what the probes read
from a host's text (an OpenWrt router's, a Raspberry Pi's), ssh's failures as messages,
and the cleanup script run by a real busybox sh against real processes."""

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tunnelbench.bench import planfile
from tunnelbench.bench.testbeds import hosts_plan
from tunnelbench.errors import UserError
from tunnelbench.kinds import Queue, TunnelKind, TunnelMode
from tunnelbench.model.plan import Experiment, expand
from tunnelbench.model.records import Resolved
from tunnelbench.model.remotefacts import CryptoDriver, RemoteFacts, SnmpView, TunnelEnd
from tunnelbench.remote import hostsfile, probes
from tunnelbench.remote.host import CLEANUP, RECORD_SELF
from tunnelbench.remote.session import Session
from tunnelbench.remote.site import HostsSite
from tunnelbench.remote.ssh import explain
from tunnelbench.remote.tunnel import RemoteTunnel

REPO = Path(__file__).resolve().parents[2]
PINNED = (REPO / ".tools" / "bin" / "wireguard-go.version").read_text().strip()

ROAD = """
[client]
ssh = "client"
[gw]
ssh = "root@192.168.1.1"
address = "192.168.1.1"
[server]
ssh = "server"
address = "198.18.1.2"
"""


def parse(text: str) -> hostsfile.HostsFile:
    return hostsfile.parse(text, Path("/tmp/hosts.toml"))


def test_a_road_warrior_hosts_file_names_each_role_and_the_dut():
    hosts = parse(ROAD + '[tunnel]\nmode = "build"\nkind = "wireguard"\nvia = "198.18.1.1"\n')
    assert hosts.roles == ("client", "gw", "server")
    assert hosts.dut == "gw"
    assert hosts.hosts["gw"].destination == "root@192.168.1.1"
    assert hosts.tunnel.ends == ("client", "gw")
    assert hosts.target(True) == hosts.target(False) == "198.18.1.2"


def test_an_existing_tunnel_sends_tunnelled_traffic_to_its_own_address():
    hosts = parse(ROAD + '[tunnel]\nmode = "existing"\nkind = "wireguard"\naddress = "10.9.0.2"\n')
    assert hosts.target(True) == "10.9.0.2"
    assert hosts.target(False) == "198.18.1.2"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (ROAD.replace('ssh = "client"', 'shh = "client"'),
         "client.shh: unknown key; did you mean 'ssh'?"),
        (ROAD.replace('address = "198.18.1.2"', 'address = "server.lan"'),
         "server.address: 'server.lan' is not an IP address"),
        (ROAD.replace('address = "198.18.1.2"', ""), "server.address: missing"),
        (ROAD.replace('ssh = "client"', 'ssh = "-oProxyCommand=x"'),
         "client.ssh: '-oProxyCommand=x' is not an SSH destination"),
        ("connect_timeout = 0\n" + ROAD, "connect_timeout: 0 is not a number of seconds"),
        (ROAD + '[tunnel]\nmode = "build"\nkind = "none"\nvia = "1.2.3.4"\n',
         "tunnel.kind: 'none': tunnelbench builds wireguard"),
        (ROAD.replace('address = "198.18.1.2"', 'address = "198.18.1.2"\naddress6 = "2001:2::2"')
         + '[tunnel]\nmode = "build"\nkind = "wireguard"\nvia = "198.18.1.1"\n',
         "tunnel.via6: missing: the server's IPv6 next hop"),
        (ROAD.replace('address = "198.18.1.2"', 'address = "198.18.1.2"\naddress6 = "198.18.1.3"'),
         "server.address6: '198.18.1.3' is not an IPv6 address"),
        (ROAD + '[tunnel]\nmode = "build"\nkind = "openvpn"\nprotection = "ipsec"\n'
         'via = "1.2.3.4"\n',
         "tunnel.protection: openvpn cannot be wrapped in ipsec; vxlan, gre, gretap can"),
        (ROAD + '[tunnel]\nmode = "build"\nkind = "vxlan"\nprotection = "wireguard"\n'
         'via = "1.2.3.4"\n',
         "tunnel.protection: 'wireguard' is none of none, ipsec"),
        (ROAD + '[tunnel]\nmode = "build"\nkind = "ipsec"\nimplementation = "wireguard-go"\n'
         'via = "1.2.3.4"\n',
         "tunnel.implementation: 'wireguard-go': ipsec is built by 'auto', 'kernel', 'libipsec'"),
        (ROAD + '[tunnel]\nmode = "build"\nkind = "wireguard"\n', "tunnel.via: missing"),
        (ROAD.replace('address = "192.168.1.1"', "")
         + '[tunnel]\nmode = "build"\nkind = "wireguard"\nvia = "1.2.3.4"\n',
         "gw.address: missing: where client reaches gw"),
        (ROAD + '[tunnel]\nmode = "existing"\nkind = "wireguard"\n', "tunnel.address: missing"),
        (ROAD + '[tunnel]\nmode = "sideways"\n', "tunnel.mode: 'sideways' is none of"),
        (ROAD.replace('address = "198.18.1.2"', 'address = "2001:2::2"'),
         "server.address: '2001:2::2' is not an IPv4 address (an IPv6 one goes in"
         " server.address6)"),
        ('layout = "site-to-site"\n' + ROAD, "gwa: missing"),
    ],
)  # fmt: skip
def test_a_bad_hosts_file_is_one_message_naming_the_key(text, message):
    with pytest.raises(UserError, match=r"^/tmp/hosts\.toml: ") as caught:
        parse(text)
    assert message in str(caught.value)


def test_a_built_tunnel_may_not_route_the_management_connection():
    hosts = parse(ROAD + '[tunnel]\nmode = "build"\nkind = "wireguard"\nvia = "198.18.1.1"\n')
    # tunnelbench runs on the server: the client would route its SSH replies into the tunnel
    why = hostsfile.management_overlap(hosts, {"client": "198.18.1.2", "gw": "10.0.0.9"})
    assert why is not None and why.startswith(
        "client.ssh: this machine reaches client from 198.18.1.2"
    )
    assert (
        hostsfile.management_overlap(
            hosts, {"client": "10.0.0.9", "gw": "10.0.0.9", "server": "10.0.0.9"}
        )
        is None
    )
    # the far end and the server route the client's tunnel address back
    assert hostsfile.management_overlap(hosts, {"server": "198.19.0.1"}) is not None


OPENWRT_FACTS = textwrap.dedent("""\
    kernel 6.6.73
    machine aarch64
    cores 4
    program iperf3 /usr/bin/iperf3
    program ip /sbin/ip
    iperf3 iperf 3.17.1 (cJSON 1.7.15)
    busybox yes
    clock 1764000000
    zone thermal_zone0 cpu-thermal
    trip thermal_zone0 120000
    trip thermal_zone0 85000
    governor 0 ondemand 1800000
    governor 1 ondemand 1800000
    forwarding 1
    crypto chacha20 chacha20-generic 100
    crypto chacha20 chacha20-neon 300
    crypto gcm(aes) gcm_base(ctr(aes-ce),ghash-generic) 200
    crypto sha256 sha256-ce 200
    crypto crc32c crc32c-generic 100
    """)


def test_facts_of_an_openwrt_router():
    facts = probes.parse_facts(OPENWRT_FACTS)
    assert (facts.kernel, facts.machine, facts.cores, facts.busybox) == (
        "6.6.73",
        "aarch64",
        4,
        True,
    )
    assert facts.programs == {"iperf3": "/usr/bin/iperf3", "ip": "/sbin/ip"}
    assert facts.zones == {"thermal_zone0": "cpu-thermal"}
    assert facts.trips_c == {"thermal_zone0": 85.0}  # the lowest trip point
    assert facts.governors == {0: "ondemand", 1: "ondemand"}
    assert facts.max_mhz == {0: 1800.0, 1: 1800.0}
    assert facts.forwarding is True
    # the kernel picks the highest priority: the NEON driver, not the generic one
    assert facts.cipher_drivers() == {
        "chacha20": ("chacha20-neon", 300),
        "gcm(aes)": ("gcm_base(ctr(aes-ce),ghash-generic)", 200),
    }


#: The software lines of the facts script on a Debian host with tunnelbench's pinned
#: builds first in PATH (this machine's), and on an OpenWrt router with its packages.
DEBIAN_SOFTWARE = textwrap.dedent("""\
    path wireguard-go /work/main/.tools/bin/wireguard-go
    version wireguard-go wireguard-go v0.0.20250522
    pinned wireguard-go v0.0.0-20260522210424-ecfc5a8d5446
    path openvpn /usr/sbin/openvpn
    version openvpn OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)] [LZO] [LZ4] [DCO]
    library openvpn library versions: OpenSSL 3.0.19 27 Jan 2026, LZO 2.10
    package openvpn openvpn 2.6.14-0+deb12u2
    path wg /usr/bin/wg
    version wg wireguard-tools v1.0.20210914 - https://git.zx2c4.com/wireguard-tools/
    package wg wireguard-tools 1.0.20210914-1+b1
    wgmodule none
    """)
OPENWRT_SOFTWARE = textwrap.dedent("""\
    path wireguard-go /usr/bin/wireguard-go
    version wireguard-go wireguard-go v0.0.20220316
    package wireguard-go wireguard-go 0.0.20220316-1
    path wg /usr/bin/wg
    version wg wireguard-tools v1.0.20210914 - https://git.zx2c4.com/wireguard-tools/
    wgmodule loaded 1.0.0
    """)


def test_each_tunnel_daemons_version_build_package_and_path():
    debian = probes.parse_facts(DEBIAN_SOFTWARE).software
    assert debian.describe("wireguard-go") == (
        "wireguard-go v0.0.20250522, built from"
        " golang.zx2c4.com/wireguard@v0.0.0-20260522210424-ecfc5a8d5446"
        " (/work/main/.tools/bin/wireguard-go)"
    )
    assert debian.describe("openvpn") == (
        "OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)] [LZO] [LZ4] [DCO],"
        " library versions: OpenSSL 3.0.19 27 Jan 2026, LZO 2.10,"
        " package openvpn 2.6.14-0+deb12u2 (/usr/sbin/openvpn)"
    )
    assert debian.describe("boringtun-cli") is None
    assert debian.kernel_wireguard() == "not found (no wireguard module for this kernel)"
    openwrt = probes.parse_facts(OPENWRT_FACTS + OPENWRT_SOFTWARE)
    assert openwrt.software.describe("wireguard-go") == (
        "wireguard-go v0.0.20220316, package wireguard-go 0.0.20220316-1 (/usr/bin/wireguard-go)"
    )
    assert openwrt.software.kernel_wireguard() == "loaded or built in (version 1.0.0)"
    assert (openwrt.record().to_json())["software"] == {
        "programs": {
            "wireguard-go": openwrt.software.describe("wireguard-go"),
            "wg": "wireguard-tools v1.0.20210914 - https://git.zx2c4.com/wireguard-tools/"
            " (/usr/bin/wg)",
        },
        "kernel_wireguard": "loaded or built in (version 1.0.0)",
    }
    assert openwrt.cores == 4  # the other facts read as before


def test_the_facts_script_reads_the_daemons_of_this_machine_with_busybox():
    done = subprocess.run(
        ["busybox", "sh", "-c", probes.FACTS],
        capture_output=True,
        text=True,
        env={"PATH": f"{REPO}/.tools/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    found = probes.parse_facts(done.stdout).software
    assert (found.describe("wireguard-go") or "").startswith("wireguard-go v0.0.")
    assert f"built from golang.zx2c4.com/wireguard@{PINNED}" in (
        found.describe("wireguard-go") or ""
    )
    assert found.wireguard_module is not None  # looked at: one of ModuleState


@pytest.mark.parametrize(
    ("ends", "user", "expected"),
    [
        ({"client": ("kernel", "linux 6.1.0-28-amd64"), "gw": ("kernel", "linux 6.1.0-28-amd64")},
         None, "linux 6.1.0-28-amd64 (client and gw)"),
        ({"client": ("kernel", "linux 6.12.1"), "gw": ("wireguard-go", "wireguard-go v0.0.2022")},
         None, "client: kernel, linux 6.12.1; gw: wireguard-go, wireguard-go v0.0.2022"),
        ({}, "the user's wireguard-go on gw: wireguard-go v0.0.2022 (/usr/bin/wireguard-go)",
         "the user's wireguard-go on gw: wireguard-go v0.0.2022 (/usr/bin/wireguard-go)"),
        ({}, None, None),
    ],
)  # fmt: skip
def test_a_remote_tunnel_names_what_ran_each_end(ends, user, expected):
    typed = {role: TunnelEnd(*end) for role, end in ends.items()}
    tunnel = RemoteTunnel(
        TunnelKind.WIREGUARD, TunnelMode.BUILD, "kernel", ends=typed, user_version=user
    )
    assert tunnel.version() == expected


PROCESSES_BEFORE = textwrap.dedent("""\
    P 1 (procd) S 0 1 1 0 -1 4194560 1000 0 0 0 50 30 0 0 20 0 1 0 5 0 0
    P 812 (wireguard-go) S 1 812 812 0 -1 4194560 1000 0 0 0 1000 500 0 0 20 0 9 0 400 0 0
    P 9 (ksoftirqd/0) S 2 0 0 0 -1 69238848 0 0 0 0 0 300 0 0 20 0 1 0 9 0 0
    cannot read /proc/77/stat
    """)
PROCESSES_AFTER = PROCESSES_BEFORE.replace(
    "0 1000 500 0 0 20 0 9", "0 1100 600 0 0 20 0 9"
).replace("0 0 300 0 0 20", "0 0 390 0 0 20")


def test_the_busiest_processes_over_a_window():
    before = probes.parse_processes(PROCESSES_BEFORE)
    after = probes.parse_processes(PROCESSES_AFTER)
    assert before[812] == ("wireguard-go", 1500) and sorted(before) == [1, 9, 812]
    # over 2 s: wireguard-go 200 ticks = 100% of a core, ksoftirqd 90 ticks = 45%
    assert probes.process_cpu(before, after, 2.0) == {"wireguard-go": 100.0, "ksoftirqd/0": 45.0}


def test_a_reused_pid_is_not_counted_as_the_same_process():
    before = probes.parse_processes(
        "P 812 (wireguard-go) S 1 812 812 0 -1 0 0 0 0 0 10 10 0 0 20 0 9 0 400 0 0"
    )
    after = probes.parse_processes(
        "P 812 (dropbear) S 1 812 812 0 -1 0 0 0 0 0 99 99 0 0 20 0 9 0 900 0 0"
    )
    assert probes.process_cpu(before, after, 1.0) == {}


def test_samples_make_per_core_shares_and_the_clock_and_heat_of_the_window():
    def sample(at: float, busy: int, temp: int, khz: int) -> probes.Sample:
        idle = 1000 + int(at * 100) - busy  # 100 ticks a second in all
        lines = [f"cpu0 {busy} 0 0 {idle} 0 0 0 0 0 0",
                 f"cpu1 0 0 0 {1000 + int(at * 100)} 0 0 0 0 0 0",
                 f"Z thermal_zone0 {temp}", f"F 0 {khz}", "F 1 1800000"]  # fmt: skip
        return probes.parse_sample(lines, at)

    samples = [sample(0.0, 0, 50000, 1800000), sample(1.0, 0, 60000, 1800000),
               sample(2.0, 100, 71000, 600000), sample(3.0, 150, 65000, 1200000)]  # fmt: skip
    figures = probes.window(samples, 1.0, 3.0)
    assert figures is not None and figures.samples == 3
    assert figures.cores[0]["user"] == pytest.approx(75.0)  # 150 of 200 ticks
    assert figures.cores[1]["idle"] == pytest.approx(100.0)
    assert figures.temp_max_c == {"thermal_zone0": 71.0}
    assert figures.mhz_min[0] == 600.0 and figures.mhz_mean[0] == pytest.approx(1200.0)
    assert probes.window(samples, 2.5, 3.0) is None  # one sample is no window


def test_the_samplers_cost_is_its_own_and_its_childrens_cpu_over_its_life():
    # uptime 1000 s; started at tick 99000 (990 s): 10 s of life; 5+3 own, 10+2 children
    stat = "4242 (sh) S 1 4242 4242 0 -1 0 0 0 0 0 5 3 10 2 20 0 1 0 99000 0 0"
    assert probes.sampler_cost(f"C 1000.00 {stat}") == pytest.approx((2.0, 10.0))
    assert probes.sampler_cost("C garbage") is None


STAT = "{pid} (sh) S 1 {pid} {pid} 0 -1 0 0 0 0 0 5 3 0 0 20 0 1 0 900 0 0"


def _proc(root: Path, present: list[int], vanished: list[int], unreadable: list[int]) -> None:
    """A /proc as the glob saw it: ``vanished`` processes are names with nothing behind
    them (dangling links: listed, then gone), ``unreadable`` ones a directory without stat."""
    root.mkdir()
    for pid in present:
        (root / str(pid)).mkdir()
        (root / str(pid) / "stat").write_text(STAT.format(pid=pid) + "\n")
    for pid in vanished:
        (root / str(pid)).symlink_to(root / "gone" / str(pid))
    for pid in unreadable:
        (root / str(pid)).mkdir()


@pytest.mark.parametrize("shell", [["busybox", "sh"], ["dash"]])
def test_a_process_that_exits_after_the_glob_is_skipped_and_fails_nothing(tmp_path, shell):
    """The captured case: the last process listed exited before its stat was read, and
    busybox's sh ended the whole counter script with exit status 1."""
    _proc(tmp_path / "proc", present=[1, 42], vanished=[17, 99], unreadable=[])
    done = subprocess.run(
        [*shell, "-c", probes.process_stats(str(tmp_path / "proc"))], capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [f"P {STAT.format(pid=1)}", f"P {STAT.format(pid=42)}"]
    assert list(probes.parse_processes(done.stdout)) == [1, 42]


@pytest.mark.parametrize("shell", [["busybox", "sh"], ["dash"]])
def test_a_process_whose_stat_cannot_be_read_still_fails_the_script(tmp_path, shell):
    _proc(tmp_path / "proc", present=[1], vanished=[], unreadable=[7])
    done = subprocess.run(
        [*shell, "-c", probes.process_stats(str(tmp_path / "proc"))], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr == f"cannot read {tmp_path}/proc/7/stat\n"


def test_the_processes_read_every_process_of_the_hosts_proc():
    assert probes.process_stats("/proc") == probes.PROCESSES
    assert probes.process_stats("/proc").startswith("for p in /proc/[0-9]*; do\n")


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        ("Host key verification failed.",
         "host key is not in known_hosts; refusing to accept it unseen"),
        ("@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.",
         "host key has CHANGED"),
        ("root@1.2.3.4: Permission denied (publickey).", "authentication failed"),
        ("ssh: connect to host 1.2.3.4 port 22: Connection refused",
         "unreachable (ssh: connect to host"),
        ("ssh: connect to host 1.2.3.4 port 22: Connection timed out", "unreachable"),
        ("ssh: Could not resolve hostname nope: Name or service not known", "unknown host name"),
    ],
)  # fmt: skip
def test_ssh_failures_become_what_to_do(stderr, expected):
    assert expected in explain("gw", stderr)
    assert explain("gw", stderr).startswith("gw: ")


def test_cleanup_ends_only_recorded_processes_and_undoes_newest_first(tmp_path):
    """busybox sh runs the record-then-exec preamble and the cleanup script for real."""
    d = tmp_path / "tunnelbench.t"
    d.mkdir()
    (d / "pids").write_text("")
    order = tmp_path / "order"
    (d / "undo").write_text(
        f"echo first >>{order}\necho second >>{order}\nip link del tbnothere0\n"
    )
    env = {"TB_DIR": str(d), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}
    recorded = subprocess.Popen(["busybox", "sh", "-c", f"{RECORD_SELF}; exec sleep 30"], env=env)
    other = subprocess.Popen(["sleep", "30"])  # same program, not recorded: left alone
    try:
        for _ in range(50):
            if (d / "pids").read_text():
                break
            subprocess.run(["sleep", "0.05"])
        pid, start = (d / "pids").read_text().split()
        assert int(pid) == recorded.pid and int(start) > 0
        done = subprocess.run(
            ["busybox", "sh", "-c", CLEANUP, "cleanup", str(d)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert recorded.wait(timeout=5) != 0  # ended by its PID
        assert other.poll() is None
        assert order.read_text() == "second\nfirst\n"
        assert not d.exists()
    finally:
        other.kill()
        other.wait()
        if recorded.poll() is None:
            recorded.kill()
            recorded.wait()


SITE = """
layout = "site-to-site"
[client]
ssh = "pc-a"
address = "10.1.0.2"
[gwa]
ssh = "root@10.1.0.1"
[gwb]
ssh = "root@10.2.0.1"
address = "192.0.2.2"
[server]
ssh = "pc-b"
address = "10.2.0.2"
[tunnel]
mode = "build"
kind = "wireguard"
ends = ["gwa", "gwb"]
"""


def test_a_road_warrior_tunnel_routes_only_the_server_and_the_clients_tunnel_address():
    hosts = parse(ROAD + '[tunnel]\nmode = "build"\nkind = "wireguard"\nvia = "198.18.1.1"\n')
    site = HostsSite(Session(hosts))
    assert site.inner_routes("client", 4) == ["198.18.1.2/32"]
    assert site.inner_routes("gw", 4) == []  # the client's inner address is on the tunnel
    assert (site.inner_address("client", 4), site.inner_peer("client", 4)) == (
        "198.19.0.1/30",
        "198.19.0.2",
    )


def test_a_site_to_site_tunnel_joins_the_two_routers_and_routes_each_sides_endpoint():
    hosts = parse(SITE)
    assert hosts.dut == "gwa" and hosts.tunnel.ends == ("gwa", "gwb")
    site = HostsSite(Session(hosts))
    assert site.inner_routes("gwa", 4) == ["10.2.0.2/32"]
    assert site.inner_routes("gwb", 4) == ["10.1.0.2/32"]
    # the routers route the endpoints: a controller behind either would lose its SSH
    assert hostsfile.management_overlap(hosts, {"gwb": "10.1.0.2"}) is not None
    assert hostsfile.management_overlap(hosts, {"gwa": "10.9.9.9", "gwb": "10.9.9.9"}) is None
    with pytest.raises(UserError, match=r"client\.address: missing"):
        parse(SITE.replace('address = "10.1.0.2"', ""))
    with pytest.raises(UserError, match=r"tunnel\.ends: \[.gwb., .gwa.\]"):
        parse(SITE.replace('ends = ["gwa", "gwb"]', 'ends = ["gwb", "gwa"]'))


def test_a_plan_for_real_hosts_may_vary_traffic_and_tunnel_not_the_lab():
    hosts = parse(ROAD + '[tunnel]\nmode = "build"\nkind = "wireguard"\nvia = "198.18.1.1"\n')
    plan = (
        'repetitions = 1\n[base.tunnel]\nkind = "wireguard"\n[matrix]\n"traffic.streams" = [1, 4]\n'
    )
    trials = hosts_plan.plan(planfile.parse(plan, "p.toml").experiment, hosts).trials
    assert [(t.seq, t.config.tunnel.kind.value, t.config.traffic.streams) for t in trials] == [
        (1, "none", 1), (2, "wireguard", 1), (3, "none", 4), (4, "wireguard", 4),
    ]  # fmt: skip
    # lab.wan's shaper, queue and impairments go on the hosts' WAN link; its MTU, the
    # LAN's, offloads and cores are the hosts' own.
    shaped = plan + '[base.lab.wan]\nrate = "100mbit"\nqueue = "bfifo"\ndelay = "5ms"\n'
    wan = (
        hosts_plan.plan(planfile.parse(shaped, "p.toml").experiment, hosts).trials[0].config.lab.wan
    )
    assert (wan.rate, wan.queue, wan.delay) == (100_000_000, Queue.BFIFO, 5000)
    for key, setting in (
        ("lab.wan.mtu", "[base.lab.wan]\nmtu = 1400\n"),
        ("lab.lan_mtu", "[base.lab]\nlan_mtu = 1400\n"),
        ("lab.offloads.gro", "[base.lab.offloads]\ngro = false\n"),
    ):
        with pytest.raises(UserError, match=rf"^{key}: cannot be set for real hosts"):
            hosts_plan.plan(planfile.parse(plan + setting, "p.toml").experiment, hosts)
    # Another kind is built between the same ends where tunnelbench builds the tunnel;
    # the user's own tunnel is the only one a hosts file with one has.
    other = 'repetitions = 1\n[base.tunnel]\nkind = "vxlan"\n'
    trials = hosts_plan.plan(planfile.parse(other, "p.toml").experiment, hosts).trials
    assert [t.config.tunnel.kind.value for t in trials] == ["none", "vxlan"]
    theirs = hostsfile.parse(
        ROAD + '[tunnel]\nmode = "existing"\nkind = "wireguard"\naddress = "10.9.0.2"\n',
        Path("h.toml"),
    )
    with pytest.raises(UserError, match=r"the hosts file's tunnel is wireguard \(existing\)"):
        hosts_plan.plan(planfile.parse(other, "p.toml").experiment, theirs)
    wrapped = hostsfile.parse(
        ROAD + '[tunnel]\nmode = "build"\nkind = "vxlan"\nvia = "198.18.1.1"\n'
        'protection = "ipsec"\n',
        Path("h.toml"),
    )
    with pytest.raises(
        UserError, match=r"^tunnel\.kind: 'wireguard': the hosts file's tunnel\.prot"
    ):
        hosts_plan.plan(planfile.parse(plan, "p.toml").experiment, wrapped)
    # iperf2 drives real hosts over TCP and UDP (its datagrams sized by the hosts' path)
    iperf2 = plan + '[base.traffic]\ngenerator = "iperf2"\n'
    assert len(hosts_plan.plan(planfile.parse(iperf2, "p.toml").experiment, hosts).trials) == 4
    udp = iperf2 + 'protocol = "udp"\nudp_rate = "100mbit"\n'
    assert len(hosts_plan.plan(planfile.parse(udp, "p.toml").experiment, hosts).trials) == 4


def test_a_tunnel_in_esp_is_the_hosts_files_and_its_trials_record_it():
    hosts = parse(
        ROAD + '[tunnel]\nmode = "build"\nkind = "vxlan"\nprotection = "ipsec"\n'
        'via = "198.18.1.1"\n'
    )
    plan = 'repetitions = 1\n[base.tunnel]\nkind = "vxlan"\n'
    trials = hosts_plan.plan(planfile.parse(plan, "p.toml").experiment, hosts).trials
    assert [(t.config.tunnel.kind.value, t.config.tunnel.protection.value) for t in trials] == [
        ("none", "none"), ("vxlan", "ipsec"),
    ]  # fmt: skip
    plain = parse(ROAD + '[tunnel]\nmode = "build"\nkind = "vxlan"\nvia = "198.18.1.1"\n')
    wrapped = plan + 'protection = "ipsec"\n'
    with pytest.raises(UserError, match=r"^tunnel\.protection: 'ipsec': the hosts file's tunnel"):
        hosts_plan.plan(planfile.parse(wrapped, "p.toml").experiment, plain)


def test_the_only_path_through_an_existing_tunnel_has_no_baseline():
    hosts = parse(
        ROAD + '[tunnel]\nmode = "existing"\nkind = "wireguard"\naddress = "198.18.1.2"\n'
    )
    plan = 'repetitions = 1\n[base.tunnel]\nkind = "wireguard"\n'
    trials = hosts_plan.plan(planfile.parse(plan, "p.toml").experiment, hosts).trials
    assert [(t.seq, t.config.tunnel.kind.value) for t in trials] == [(1, "wireguard")]
    with pytest.raises(UserError, match="'none' needs a path around the tunnel"):
        hosts_plan.plan(
            planfile.parse('[base.tunnel]\nkind = "none"\n', "p.toml").experiment, hosts
        )


def test_a_stored_remote_record_reads_back_typed_and_is_stored_as_it_was():
    """Two trials' ``resolved.remote`` as a remote run stored them before the record was
    typed (OpenVPN between the client and gw, and its baseline): read back field by
    field, written back with the same keys and values (a None is left out)."""
    stored = json.loads((FIXTURES / "remote" / "resolved-remote.json").read_text())
    for name, data in stored.items():
        facts = RemoteFacts.from_dict(data)
        assert facts.to_dict() == {k: v for k, v in data.items() if v is not None}, name
        assert RemoteFacts.from_dict(facts.to_dict()) == facts
        assert facts.dut == "gw" and facts.dut_view == "ssh" and facts.extra == {}
        assert facts.crypto_drivers["aes"] == CryptoDriver("aes-fixed-time", 101)
    built = RemoteFacts.from_dict(stored["openvpn"])
    assert built.tunnel_ends["gw"].implementation == "openvpn"
    assert built.tunnel_devices == {"gw": "tb6530-ovgw", "client": "tb6530-ovct"}
    assert built.port == 5253 and built.dut_qdiscs == {"tb6530-ovgw": "pfifo_fast"}
    # through the trial's record, and a key a later version added kept as it was
    resolved = Resolved.from_dict({"remote": stored["none"] | {"later": 1}})
    assert isinstance(resolved.remote, RemoteFacts) and resolved.remote.extra == {"later": 1}
    assert resolved.to_dict()["remote"]["later"] == 1
    served = {"description": "RouterOS", "interfaces": ["ether1"], "cpu_counters": True}
    snmp = {"dut": "gw", "dut_view": "snmp", "dut_snmp": served | {"cores": 4, "cache_s": 5.0}}
    box = RemoteFacts.from_dict(snmp)
    assert box.dut_snmp == SnmpView("RouterOS", ("ether1",), True, 4, 5.0)
    assert box.to_dict()["dut_snmp"] == snmp["dut_snmp"]
    assert RemoteFacts.from_dict(box.to_dict()) == box


@pytest.mark.parametrize("shell", [["busybox", "sh"], ["dash"]])
def test_the_sampler_reads_every_core_and_its_own_cost_with_no_program_but_sleep(tmp_path, shell):
    programs = tmp_path / "bin"  # sleep alone: a grep per sample would fail under dash
    programs.mkdir()
    (programs / "sleep").symlink_to(shutil.which("sleep") or "/bin/sleep")
    shell = [shutil.which(shell[0]) or shell[0], *shell[1:]]
    done = subprocess.run(
        [*shell, "-c", probes.SAMPLER, "sampler", "t", "3"],
        capture_output=True, text=True, env={"TB_DIR": str(tmp_path), "PATH": str(programs)},
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    blocks = done.stdout.split("E\n")
    samples = [probes.parse_sample(b.splitlines(), 0.0) for b in blocks[:-1]]
    assert len(samples) == 3
    # every core this machine has, and not the "cpu " line of all of them together
    assert all(sorted(s.cores) == list(range(os.cpu_count() or 0)) for s in samples)
    assert probes.sampler_cost(blocks[-1].strip()) is not None


def test_a_hosts_plan_is_seeded_and_expanded_as_the_labs_and_expands_again_on_resume():
    """A shuffled, adaptive plan without a seed: seeded once (recorded with the run), its
    trials those of the lab's expansion of the experiment fitted to the hosts, so that a
    resumed run (from the stored experiment) and its extra rounds find the same keys;
    a baseline that would cross the user's tunnel is left out of both."""
    hosts = parse(ROAD + '[tunnel]\nmode = "build"\nkind = "wireguard"\nvia = "198.18.1.1"\n')
    plan = (
        'order = "shuffled"\nrepetitions = { target = "2%", min = 2, max = 4 }\n'
        '[base.tunnel]\nkind = "wireguard"\n[matrix]\n"traffic.streams" = [1, 4]\n'
    )
    prepared = hosts_plan.plan(planfile.parse(plan, "p.toml").experiment, hosts)
    assert prepared.experiment.seed is not None and prepared.experiment.adaptive is not None
    trials = [(t.seq, t.config.key()) for t in prepared.trials]
    assert trials == [(t.seq, t.config.key()) for t in expand(prepared.experiment)]
    assert len(trials) == 8 and {t.config.lab.topology.value for t in prepared.trials} == {
        "road-warrior"
    }
    stored = Experiment.from_dict(json.loads(json.dumps(prepared.experiment.to_dict())))
    again = hosts_plan.expanded(stored, hosts)
    assert [(t.seq, t.config.key()) for t in again.trials] == trials
    existing = parse(
        ROAD + '[tunnel]\nmode = "existing"\nkind = "wireguard"\naddress = "198.18.1.2"\n'
    )
    only = hosts_plan.plan(planfile.parse(plan, "p.toml").experiment, existing)
    assert [t.seq for t in only.trials] == [1, 2, 3, 4]
    assert {t.config.tunnel.kind for t in only.trials} == {TunnelKind.WIREGUARD}
    assert set(only.skipped.values()) == {hosts_plan.NO_PLAIN_PATH}  # no extra round either


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("fresh_labs = true\n", r"^fresh_labs: cannot be set for real hosts"),
        ('[base.tunnel]\nkind = "wireguard"\nmtu = 1380\n', r"^tunnel\.mtu: the hosts file's"),
    ],
)
def test_a_setting_real_hosts_cannot_take_is_refused_by_name(setting, message):
    existing = parse(
        ROAD + '[tunnel]\nmode = "existing"\nkind = "wireguard"\naddress = "198.18.9.2"\n'
    )
    plan = planfile.parse("repetitions = 1\n" + setting, "p.toml").experiment
    with pytest.raises(UserError, match=message):
        hosts_plan.plan(plan, existing)
