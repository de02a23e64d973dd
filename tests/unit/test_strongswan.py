"""strongSwan as tunnelbench drives it: the generated files against golden copies, the
commands, and ``swanctl --list-sas`` output captured from real labs (libipsec, both
ciphers). Regenerate the golden files with ``TB_UPDATE_GOLDEN=1 pytest
tests/unit/test_strongswan.py`` and read the diff."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.unit.probe_fixtures import lab_like
from tunnelbench.errors import LabError
from tunnelbench.kinds import Cipher, EspMode, Topology
from tunnelbench.lab.topology import Underlay
from tunnelbench.model.plan import LabSettings
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.esp import Session, nat_t_ports, protected_ends
from tunnelbench.tunnels.ipsec import selectors
from tunnelbench.tunnels.strongswan import KERNEL, LIBIPSEC, Child

GOLDEN = FIXTURES / "golden" / "strongswan"
CAPTURED = FIXTURES / "strongswan"
PSK = "5a" * 32  # a stand-in: labs make theirs with secrets.token_hex(32)
AES, CHACHA = Cipher.AES_256_GCM, Cipher.CHACHA20_POLY1305
TUNNEL, TRANSPORT = EspMode.TUNNEL, EspMode.TRANSPORT

# (golden name, what, implementation, cipher, mode, role): every combination a lab can
# ask for, at the left (initiating) end, and one right end to show the mirror image.
CASES = [
    ("ipsec-libipsec-aes-256-gcm", "ipsec", LIBIPSEC, AES, TUNNEL, "client"),
    ("ipsec-libipsec-aes-256-gcm-right", "ipsec", LIBIPSEC, AES, TUNNEL, "gw"),
    ("ipsec-libipsec-chacha20-poly1305", "ipsec", LIBIPSEC, CHACHA, TUNNEL, "client"),
    ("ipsec-kernel-aes-256-gcm", "ipsec", KERNEL, AES, TUNNEL, "client"),
    ("ipsec-kernel-chacha20-poly1305", "ipsec", KERNEL, CHACHA, TUNNEL, "client"),
    ("vxlan-ipsec-libipsec-aes-256-gcm", "vxlan", LIBIPSEC, AES, TUNNEL, "gwa"),
    ("vxlan-ipsec-libipsec-chacha20-poly1305", "vxlan", LIBIPSEC, CHACHA, TUNNEL, "gwa"),
    ("vxlan-ipsec-kernel-tunnel-aes-256-gcm", "vxlan", KERNEL, AES, TUNNEL, "gwa"),
    ("vxlan-ipsec-kernel-transport-aes-256-gcm", "vxlan", KERNEL, AES, TRANSPORT, "gwa"),
    ("vxlan-ipsec-kernel-transport-chacha20-poly1305", "vxlan", KERNEL, CHACHA, TRANSPORT, "gwa"),
]


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("TB_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from its golden copy"


def _swanctl(what: str, implementation: str, cipher: Cipher, mode: EspMode, role: str) -> str:
    """The swanctl.conf a lab writes for ``role``, through the code the lab runs."""
    topology = Topology.ROAD_WARRIOR if what == "ipsec" else Topology.SITE_TO_SITE
    lab = lab_like("ab12cd", LabSettings(topology=topology))
    session = Session(lab, implementation, cipher, mode)
    if what == "ipsec":
        children: tuple[Child, ...] = (Child(strongswan.CONNECTION, *selectors(lab, role, 1400)),)
    else:
        children = protected_ends(lab, mode, "udp")[role][1]
    return strongswan.swanctl_conf(session.connection(role, children), PSK)


@pytest.mark.parametrize(
    ("name", "what", "implementation", "cipher", "mode", "role"), CASES, ids=[c[0] for c in CASES]
)
def test_swanctl_conf_matches_golden(name, what, implementation, cipher, mode, role):
    _golden(f"{name}.swanctl.conf", _swanctl(what, implementation, cipher, mode, role))


@pytest.mark.parametrize("implementation", [KERNEL, LIBIPSEC])
def test_strongswan_conf_matches_golden(implementation):
    _golden(f"strongswan-{implementation}.conf", strongswan.strongswan_conf(implementation))


def test_the_libipsec_daemon_loads_exactly_its_plugins_and_keeps_routes_to_the_lab():
    text = strongswan.strongswan_conf(LIBIPSEC)
    # every plugin critical (a missing one stops charon at start, named in its log) but
    # kernel-netlink, whose kernel ESP feature libipsec replaces
    assert (
        "load = random! nonce! openssl! kdf! kernel-libipsec! kernel-netlink socket-default! "
        "vici!" in text
    )
    assert "install_routes = no" in text
    # kernel-libipsec's own routes go to a table of the daemon's own, never the main one
    assert "routing_table = 220" in text
    assert "routing_table = 1952579585" in strongswan.strongswan_conf(LIBIPSEC, 4500, 0x74620001)
    assert "socket = unix:///run/charon.vici" in text  # inside its private /run
    assert "load_modular" not in text and "include" not in text


def test_the_nat_t_port_is_4500_where_every_end_has_it_free_else_another_free_one():
    class Ports:
        tunnel_ends = ("client", "gw")

        def __init__(self, used: dict[str, set[int]]) -> None:
            self.used = used

        def free_udp_port(self, role: str, ports: range) -> int:
            free = [p for p in ports if p not in self.used[role]]
            if not free:
                raise LabError(f"{role}: no free UDP port in {ports.start}-{ports.stop - 1}")
            return free[0]

    assert nat_t_ports(Ports({"client": set(), "gw": set()})) == {"client": 4500, "gw": 4500}  # type: ignore[arg-type]
    # one end's own IKE daemon holds 4500: both ends move, so no end floats to 4500
    assert nat_t_ports(Ports({"client": set(), "gw": {4500, 4501}})) == {  # type: ignore[arg-type]
        "client": 4501,
        "gw": 4502,
    }

    class Site(Ports):
        def wan_underlay(self, role: str) -> Underlay:
            return Underlay(
                *(("10.0.0.1", "10.0.0.2") if role == "client" else ("10.0.0.2", "10.0.0.1")),
                "eth0",
            )

    session = Session(Site({}), LIBIPSEC, AES, TUNNEL)  # type: ignore[arg-type]
    session.ports = {"client": 4501, "gw": 4502}
    # IKE runs between the two NAT-T ports from its first message
    text = strongswan.swanctl_conf(session.connection("gw", ()), PSK)
    assert "local_port = 4502\n        remote_port = 4501\n" in text


def test_a_killed_daemons_rules_are_removed_by_table_and_only_those(tmp_path):
    argv = strongswan.rules_removal(0x74620001)
    assert argv[:2] == ["sh", "-c"]
    assert "ip -4 rule del table 1952579585" in argv[2]
    assert "ip -6 rule del table 1952579585" in argv[2]
    # run against a stand-in ip: two rules of the table, then the kernel's "none left";
    # another refusal fails the line with the kernel's words
    ip = tmp_path / "ip"
    count = tmp_path / "count"
    ip.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) >{count}\n"
        'case "$n" in 0|1) exit 0;; esac\n'
        'echo "RTNETLINK answers: $IP_SAYS" >&2; exit 2\n'
    )
    ip.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "IP_SAYS": "No such file or directory"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and int(count.read_text()) == 4  # 2 + none left; v6 none
    count.unlink()
    env["IP_SAYS"] = "Operation not permitted"
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "Operation not permitted" in done.stderr


def test_selectors_are_the_inner_prefixes_of_both_families():
    lab = lab_like("ab12cd", LabSettings(topology=Topology.SITE_TO_SITE))
    local, remote = selectors(lab, "gwa", 1400)
    assert local == ("198.19.0.1/32", "198.18.0.0/24", "2001:2:0:ff::1/128", "2001:2:0:0::/64")
    assert remote == ("198.19.0.2/32", "198.18.2.0/24", "2001:2:0:ff::2/128", "2001:2:0:2::/64")
    assert selectors(lab, "gwb", 1400) == (remote, local)


def test_protected_tunnel_mode_runs_between_the_esp_endpoints():
    lab = lab_like("ab12cd", LabSettings(topology=Topology.SITE_TO_SITE))
    ends = protected_ends(lab, TUNNEL, "udp")
    underlay, children = ends["gwa"]
    assert (underlay.local, underlay.remote, underlay.device) == ("198.19.1.1", "198.19.1.2", None)
    assert children == (Child("tb", ("198.19.1.1/32",), ("198.19.1.2/32",)),)
    underlay, children = protected_ends(lab, TRANSPORT, "udp")["gwb"]
    assert (underlay.local, underlay.remote, underlay.device) == (
        "198.18.1.2",
        "198.18.1.1",
        "tbab12cd-gwa",
    )
    assert children == (Child("tb", ("dynamic[udp]",), ("dynamic[udp]",)),)


def test_the_daemon_is_exec_chained_into_a_private_run():
    directory = Path("/run/tunnelbench/labs/ab12cd/strongswan-gw")
    assert strongswan.daemon_argv(directory) == [
        "unshare", "--mount", "--propagation", "private", "--",
        "sh", "-c", 'mount --bind "$0" /run && exec "$@"', str(directory),
        "env", "STRONGSWAN_CONF=/run/strongswan.conf", "/usr/lib/ipsec/charon",
    ]  # fmt: skip
    assert strongswan.swanctl_argv(directory, "--list-sas", "--raw") == [
        "env", f"STRONGSWAN_CONF={directory}/strongswan.conf", "swanctl", "--list-sas", "--raw",
        "--uri", f"unix://{directory}/charon.vici",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("capture", "cipher", "algorithm"),
    [
        ("aes256gcm16-client", AES, "AES_GCM_16-256"),
        ("aes256gcm16-gw", AES, "AES_GCM_16-256"),
        ("chacha20poly1305-client", CHACHA, "CHACHA20_POLY1305"),
        ("chacha20poly1305-gw", CHACHA, "CHACHA20_POLY1305"),
    ],
)
def test_installed_child_sas_from_real_labs(capture, cipher, algorithm):
    (sa,) = strongswan.child_sas((CAPTURED / f"list-sas-{capture}.txt").read_text())
    assert (sa.name, sa.state, sa.mode, sa.encap) == ("tb", "INSTALLED", "TUNNEL", True)
    assert sa.cipher is cipher and sa.algorithm == algorithm
    assert (sa.bytes_in, sa.bytes_out, sa.packets_in, sa.packets_out) == (0, 0, 0, 0)


def test_an_ike_sa_still_connecting_has_no_child_sa():
    assert strongswan.child_sas((CAPTURED / "list-sas-connecting-gw.txt").read_text()) == []


def test_counters_and_an_algorithm_tunnelbench_never_asks_for():
    line = (
        "list-sa event {tb {state=ESTABLISHED child-sas {tb-7 {name=tb state=INSTALLED "
        "mode=TUNNEL encap=no encr-alg=AES_CBC encr-keysize=128 bytes-in=1500 packets-in=1 "
        "bytes-out=3000 packets-out=2 local-ts=[10.0.0.0/8] remote-ts=[]}}}}\n"
    )
    (sa,) = strongswan.child_sas(line)
    assert (sa.bytes_in, sa.packets_in, sa.bytes_out, sa.packets_out) == (1500, 1, 3000, 2)
    assert sa.cipher is None and sa.algorithm == "AES_CBC-128" and not sa.encap


def test_truncated_swanctl_output_is_an_error():
    with pytest.raises(LabError, match="truncated swanctl output"):
        strongswan.child_sas("list-sa event {tb {child-sas {tb-1 {name=tb\n")


def test_version_from_charon():
    assert strongswan.version("Linux strongSwan 5.9.8\n") == "5.9.8"
    with pytest.raises(LabError, match="cannot read strongSwan's version"):
        strongswan.version("charon: unknown option\n")
