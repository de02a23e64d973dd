"""Real labs: every topology with every tunnel kind carries traffic, and goes away."""

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench import capabilities, skips
from tunnelbench.errors import LabError
from tunnelbench.kinds import Shaper, Topology, TunnelKind
from tunnelbench.lab import netns
from tunnelbench.lab import state as lab_state
from tunnelbench.model.plan import LabSettings, LinkSettings, TrialConfig, TunnelSettings
from tunnelbench.tunnels import REGISTRY


def ping(lab: netns.Lab, target: str) -> subprocess.CompletedProcess[str]:
    return lab.exec(lab.chain.client, ["ping", "-c", "1", "-W", "2", target], check=False)


@pytest.mark.parametrize("topology", list(Topology))
@pytest.mark.parametrize("kind", list(TunnelKind))
def test_client_reaches_server_through_the_tunnel(topology, kind):
    tunnel = REGISTRY.get(kind)
    family = tunnel.families[0]  # sit carries IPv6 only
    config = TrialConfig.from_dict({"tunnel": {"kind": kind.value}, "traffic": {"family": family}})
    if reason := skips.unmet(config, capabilities.probe()):
        pytest.skip(reason)
    spec = tunnel.resolve(TunnelSettings(kind=kind), 1500)
    lab = netns.build(LabSettings(topology=topology), tunnel=kind is not TunnelKind.NONE)
    try:
        handle = tunnel.setup(lab, spec)
        server = lab.chain.server
        for carried in tunnel.families:  # ipip carries IPv4 only, sit IPv6 only
            address = lab.address(server, lab.chain.roles[-2], carried)
            assert ping(lab, address).returncode == 0, f"IPv{carried} ping to {address} failed"
        if kind is not TunnelKind.NONE:
            left = lab.chain.tunnel_ends[0]
            target = lab.address(server, lab.chain.roles[-2], family)
            route = lab.exec(left, ["ip", "-j", "route", "get", target]).stdout
            assert json.loads(route)[0]["dev"] == handle.devices[left]
            mtu = lab.exec(left, ["cat", f"/sys/class/net/{handle.devices[left]}/mtu"]).stdout
            assert int(mtu) == spec.mtu == tunnel.default_mtu(1500, spec)
    finally:
        lab.teardown()
    assert not [n for n in lab_state.list_namespaces() if n.startswith(f"tb-{lab.lab_id}-")]
    assert not lab.state.directory.exists()


@pytest.mark.parametrize("topology", list(Topology))
def test_each_veth_end_has_an_index_of_its_own_and_is_up_when_built(topology):
    """Two ends of one index are taken by the kernel for a device on itself, whose
    carrier then waits up to a second for the link watcher (netns.link_indexes): every
    end's index differs from its peer's and from every other end's in the lab, and each
    is up as soon as the build returns."""
    lab = netns.build(LabSettings(topology=topology))
    try:
        ends = {}
        for role in lab.chain.roles:
            shown = lab.exec(role, ["ip", "-j", "link", "show", "type", "veth"]).stdout
            for link in json.loads(shown):
                assert link["ifindex"] != link["link_index"], (role, link)
                assert link["operstate"] == "UP", (role, link)
                ends[(role, link["ifname"])] = (link["ifindex"], link["link_index"])
        assert len(ends) == 2 * len(lab.chain.links)
        assert len({index for index, _ in ends.values()}) == len(ends)
        # each end's peer is the other end of its pair
        assert {peer for _, peer in ends.values()} == {index for index, _ in ends.values()}
    finally:
        lab.teardown()


@pytest.mark.parametrize("shaper", list(Shaper))
def test_wan_shaping_is_applied_on_both_ends(shaper):
    settings = LabSettings(wan=LinkSettings(rate=100_000_000, shaper=shaper, queue_limit=50))
    lab = netns.build(settings)
    try:
        for role in lab.chain.tunnel_ends:
            device = lab.wan_device(role)
            qdiscs = json.loads(lab.exec(role, ["tc", "-j", "qdisc", "show", "dev", device]).stdout)
            kinds = {q["kind"] for q in qdiscs}
            assert shaper.value in kinds
            if shaper is Shaper.HTB:
                assert any(q["kind"] == "pfifo" and q["options"]["limit"] == 50 for q in qdiscs)
    finally:
        lab.teardown()


def test_a_failed_build_removes_what_it_created(monkeypatch):
    """A tc failure mid-build is an error, and the half-built lab is gone."""
    settings = LabSettings(wan=LinkSettings(rate=100_000_000))
    monkeypatch.setattr(
        netns,
        "link_commands",
        lambda *a: [["qdisc", "replace", "dev", "nosuchdev", "root", "tbf"]],
    )
    before = set(lab_state.list_namespaces())
    with pytest.raises(
        LabError, match=r"`tc -n tb-fail01-\w+ qdisc replace dev nosuchdev root tbf` failed: \S"
    ):
        netns.build(settings, lab_id="fail01")
    assert set(lab_state.list_namespaces()) == before
    assert "fail01" not in lab_state.known_labs()


def test_lab_verbs_up_status_exec_down(tmp_path):
    up = tunnelbench(
        "lab", "up", "--tunnel", "wireguard", "--name", "vrb1", "--topology", "site-to-site"
    )
    assert up.returncode == 0, up.stderr
    assert "lab vrb1 is up (site-to-site, tunnel wireguard via wireguard-go, MTU 1420)" in up.stdout
    try:
        status = tunnelbench("lab", "status")
        assert (
            "vrb1: site-to-site, tunnel wireguard, 4/4 namespaces, 2/2 processes alive"
            in status.stdout
        )
        ping = tunnelbench(
            "lab",
            "exec",
            "--lab",
            "vrb1",
            "client",
            "--",
            "ping",
            "-c",
            "1",
            "-W",
            "2",
            "198.18.2.2",
        )
        assert ping.returncode == 0, ping.stdout + ping.stderr
        bad = tunnelbench("lab", "exec", "--lab", "vrb1", "gw", "--", "true")
        assert bad.returncode == 2
        assert "role: 'gw' is not in this lab; roles: client, gwa, gwb, server" in bad.stderr
    finally:
        down = tunnelbench("lab", "down", "vrb1")
    assert down.returncode == 0, down.stderr
    assert "lab vrb1 removed" in down.stdout


def test_lab_clean_removes_a_lab_whose_owner_died():
    """A lab left by a crashed tunnelbench (daemons running) is removed by `lab clean`."""
    up = tunnelbench("lab", "up", "--tunnel", "wireguard", "--name", "orph1")
    assert up.returncode == 0, up.stderr
    state = lab_state.LabState.load("orph1")
    assert all(lab_state.is_alive(p) for p in state.processes)
    assert any(Path(f).name.endswith(".sock") and Path(f).exists() for f in state.files)
    clean = tunnelbench("lab", "clean")
    assert clean.returncode == 0, clean.stderr
    assert "lab orph1 removed" in clean.stdout
    assert not any(lab_state.is_alive(p) for p in state.processes)
    assert not any(Path(f).exists() for f in state.files)


def test_ctrl_c_during_teardown_still_removes_everything(monkeypatch):
    lab = netns.build(LabSettings())
    real_delete = lab_state.delete_namespace
    deletes: list[str] = []

    def interrupted_once(name: str) -> str | None:
        # The first namespace deletion is hit by Ctrl-C just as it starts.
        deletes.append(name)
        if len(deletes) == 1:
            raise KeyboardInterrupt
        return real_delete(name)

    monkeypatch.setattr(lab_state, "delete_namespace", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        lab.teardown()
    assert len(deletes) == 4  # the interrupted one, retried, and the other two
    assert not [n for n in lab_state.list_namespaces() if n.startswith(f"tb-{lab.lab_id}-")]
    assert not lab.state.directory.exists()


def test_teardown_ends_a_process_that_entered_the_namespace_after_its_scan():
    """A process that enters a namespace after teardown's scan (a probe's short read
    started as Ctrl-C arrived; here, a shell that starts one as it is ended) is ended by
    a further round: the namespace goes (CI once kept a client namespace this way)."""
    lab = netns.build(LabSettings())
    client = lab.chain.client
    script = "trap 'sleep 30 & exit 0' TERM; while :; do sleep 0.05; done"
    shell = lab.exec(client, ["sh", "-c", f"({script}) >/dev/null 2>&1 & echo $!"]).stdout
    assert int(shell) > 0
    namespace = lab.ns(client)
    deadline = 0
    while not lab_state.namespace_processes(namespace) and deadline < 100:
        deadline += 1
        subprocess.run(["sleep", "0.01"], check=True)
    assert lab_state.namespace_processes(namespace)
    lab.teardown()
    assert namespace not in lab_state.list_namespaces()
    assert not lab.state.directory.exists()


def test_a_namespace_is_deleted_as_ip_netns_delete_does_it():
    name = "tb-deltest-client"
    subprocess.run(["ip", "netns", "add", name], check=True)
    inode = Path(f"/run/netns/{name}").stat().st_ino
    assert lab_state.delete_namespace(name) is None
    assert (
        name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )
    assert not Path(f"/run/netns/{name}").exists()
    # Its mount went with it: nothing in this mount namespace still holds that inode.
    assert f"/run/netns/{name}" not in Path("/proc/self/mountinfo").read_text(), inode
    assert lab_state.delete_namespace(name) is not None  # a second time: nothing to remove
    assert lab_state.delete_namespace("../etc") == "'../etc' is not a namespace name"
