"""Per-trial lab settings applied for real: the WAN's queue discipline, offloads, receive
packet steering, TCP congestion control, CPU budgets of tunnel daemons, UDP traffic.

Assertions are on configuration and counters; throughput only where the setting's effect
is large (a CPU budget), with a wide margin, as other tests may run at the same time.
Settings this kernel lacks (fq_codel, cake, fq...) are skipped with the reason.
"""

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tunnelbench.bench.labpool import LabPool
from tunnelbench.bench.runner import Resolution, _measure
from tunnelbench.bench.testbeds.lab import LabTestbed
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Direction, Protocol, Queue, Shaper, StreamMode, Topology, TunnelKind
from tunnelbench.lab import cgroup, netns
from tunnelbench.lab import state as lab_state
from tunnelbench.model.plan import (
    LabSettings,
    LinkSettings,
    Offloads,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
)
from tunnelbench.model.records import Resolved
from tunnelbench.system import programs
from tunnelbench.traffic.base import closed_already
from tunnelbench.traffic.iperf3 import Iperf3
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.base import TunnelSpec

LIMIT = 50


@functools.cache
def kernel_lacks(qdisc: str) -> str | None:
    """Why this kernel cannot run ``qdisc`` (None when it can), probed in a throwaway
    network namespace."""
    done = subprocess.run(
        ["unshare", "--net", "--", "tc", "qdisc", "add", "dev", "lo", "root", qdisc],
        capture_output=True,
        text=True,
    )
    if done.returncode == 0:
        return None
    return f"this kernel has no {qdisc} qdisc ({done.stderr.strip() or 'tc failed'})"


def need(queue: Queue | None) -> None:
    if queue is not None and (reason := kernel_lacks(queue.value)):
        pytest.skip(reason)


def qdiscs(lab: netns.Lab, role: str, device: str) -> list[dict[str, Any]]:
    shown = lab.exec(role, ["tc", "-s", "-j", "qdisc", "show", "dev", device]).stdout
    result: list[dict[str, Any]] = json.loads(shown)
    return result


def txqueuelen(lab: netns.Lab, role: str, device: str) -> int:
    return int(json.loads(lab.exec(role, ["ip", "-j", "link", "show", device]).stdout)[0]["txqlen"])


def check_queue(qdisc: dict[str, Any], queue: Queue | None) -> None:
    kind = (queue or Queue.PFIFO).value
    assert qdisc["kind"] == kind
    if queue is Queue.CAKE:
        assert qdisc["options"]["bandwidth"] == "unlimited"
    elif queue is Queue.BFIFO:
        assert qdisc["options"]["limit"] == LIMIT * 1514  # full frames' bytes
    elif queue is not Queue.PFIFO_FAST:
        assert qdisc["options"]["limit"] == LIMIT


@pytest.mark.parametrize("queue", [None, *Queue])
@pytest.mark.parametrize("shaper", list(Shaper))
def test_shaped_wan_has_the_queue_under_the_shaper(shaper, queue):
    need(queue)
    wan = LinkSettings(rate=100_000_000, shaper=shaper, queue=queue, queue_limit=LIMIT)
    lab = netns.build(LabSettings(wan=wan))
    try:
        for role in lab.chain.tunnel_ends:
            device = lab.wan_device(role)
            by_handle = {q["handle"]: q for q in qdiscs(lab, role, device)}
            assert by_handle["1:"]["kind"] == shaper.value and by_handle["1:"]["root"]
            leaf = by_handle["10:"]
            assert leaf["parent"] == "1:1"
            check_queue(leaf, queue)
            expected_len = LIMIT if queue is Queue.PFIFO_FAST else 1000
            assert txqueuelen(lab, role, device) == expected_len
    finally:
        lab.teardown()


@pytest.mark.parametrize("queue", [None, *Queue])
def test_unshaped_wan_has_the_queue_as_its_root(queue):
    need(queue)
    lab = netns.build(LabSettings(wan=LinkSettings(queue=queue, queue_limit=LIMIT)))
    try:
        for role in lab.chain.tunnel_ends:
            device = lab.wan_device(role)
            (root,) = qdiscs(lab, role, device)
            if queue is None:
                assert root["kind"] == "noqueue"  # a veth's default: nothing was added
            else:
                assert root["root"] and root["handle"] == "1:"
                check_queue(root, queue)
        lan_end = lab.chain.roles[-1]
        (lan,) = qdiscs(lab, lan_end, lab.link_device(lan_end, lab.chain.roles[-2]))
        assert lan["kind"] == "noqueue", "only the WAN link is queued"
    finally:
        lab.teardown()


def features(lab: netns.Lab, role: str, device: str) -> dict[str, str]:
    lines = lab.exec(role, ["ethtool", "-k", device]).stdout.splitlines()[1:]
    pairs = (line.strip().split(": ", 1) for line in lines if ": " in line)
    return {name: value.split()[0] for name, value in pairs}


def check_offloads(found: dict[str, str], gro: str, gso: str, tso: str) -> None:
    assert found["generic-receive-offload"] == gro
    assert found["generic-segmentation-offload"] == gso
    assert found["tx-tcp-segmentation"] == tso


def test_offloads_are_set_on_the_links_of_the_listed_roles():
    offloads = Offloads(gro=True, gso=False, tso=False, roles=("gw",))
    lab = netns.build(LabSettings(offloads=offloads))
    try:
        for (role, _), iface in lab.interfaces.items():
            found = features(lab, role, iface.name)
            if role == "gw":
                check_offloads(found, gro="on", gso="off", tso="off")
            else:  # a NIC's defaults: GRO on, TSO/GSO the kernel's
                check_offloads(found, gro="on", gso="on", tso="on")
    finally:
        lab.teardown()


def test_offloads_without_roles_apply_to_every_link():
    lab = netns.build(LabSettings(topology=Topology.SITE_TO_SITE, offloads=Offloads(gso=False)))
    try:
        assert len(lab.interfaces) == 6
        for (role, _), iface in lab.interfaces.items():
            found = features(lab, role, iface.name)
            assert found["generic-segmentation-offload"] == "off"
            assert found["generic-receive-offload"] == "on"  # not set: a NIC's default
    finally:
        lab.teardown()


def test_an_offload_role_the_topology_lacks_is_refused_before_anything_is_built():
    before = set(lab_state.list_namespaces())
    offloads = Offloads(gro=True, roles=("gwa",))
    with pytest.raises(LabError, match="'gwa' is not a role of this topology; roles: client, gw"):
        netns.build(LabSettings(offloads=offloads), lab_id="offl01")
    assert set(lab_state.list_namespaces()) == before
    assert "offl01" not in lab_state.known_labs()


def test_rps_mask_is_written_to_every_receive_queue_of_every_link():
    lab = netns.build(LabSettings(topology=Topology.SITE_TO_SITE, rps_cpus="2"))
    try:
        for (role, _), iface in lab.interfaces.items():
            queues = f"/sys/class/net/{iface.name}/queues/"
            found = lab.exec(role, ["find", queues, "-name", "rps_cpus"]).stdout.split()
            assert found, f"no receive queues for {iface.name}"
            for path in found:
                assert int(lab.exec(role, ["cat", path]).stdout, 16) == 2, path
    finally:
        lab.teardown()


# --- trials through the runner ---


def measure(config: TrialConfig) -> tuple[Any, dict[str, float], dict[str, Any]]:
    """One trial as the runner measures it: (the generator's raw output, metrics,
    resolved)."""
    tunnel = TUNNELS.get(config.tunnel.kind)
    try:
        spec = tunnel.resolve(config.tunnel, config.lab.wan.mtu)
        for program, purpose in tunnel.programs(spec.implementation):
            programs.require(program, purpose)
    except UserError as exc:
        pytest.skip(str(exc))
    resolution = Resolution(
        tunnel=spec,
        version=tunnel.version(spec.implementation),
        stream_mode=Iperf3().resolve_mode(config.traffic),
    )
    resolved = Resolved()
    resolved.traffic.stream_mode = resolution.stream_mode
    with LabTestbed(LabPool()) as lab:
        metrics, artifacts = _measure(config, resolution, resolved, lab)
    return artifacts[config.traffic.generator.value], metrics, resolved.to_dict()


@pytest.mark.parametrize(
    ("algorithm", "direction"),
    [("bbr", Direction.UPLOAD), ("reno", Direction.DOWNLOAD), ("cubic", Direction.DOWNLOAD)],
)
def test_congestion_control_is_what_the_senders_use(algorithm, direction):
    # Set per socket: also algorithms a namespace's sysctl may not pick (on this host,
    # tcp_allowed_congestion_control is "reno bbr", so cubic proves it).
    traffic_settings = TrafficSettings(
        duration=1, warmup=0, direction=direction, congestion=algorithm
    )
    traffic, _, resolved = measure(TrialConfig(traffic=traffic_settings))
    assert traffic[0]["end"]["sender_tcp_congestion"] == algorithm
    assert traffic[0]["end"]["receiver_tcp_congestion"] == algorithm
    assert resolved["congestion"] == algorithm


def wireguard_go(budget: float | None) -> TunnelSettings:
    return TunnelSettings(TunnelKind.WIREGUARD, implementation="wireguard-go", cpu_budget=budget)


def test_cpu_budget_moves_every_daemon_thread_into_its_own_cgroup():
    tunnel = TUNNELS.get(TunnelKind.WIREGUARD)
    try:
        programs.require("wireguard-go", "userspace WireGuard")
    except UserError as exc:
        pytest.skip(str(exc))
    lab = netns.build(LabSettings(), tunnel=True)
    try:
        handle = tunnel.setup(lab, TunnelSpec("wireguard-go", 1420))
        limit = cgroup.limit_cpu(lab.state, handle.daemons, 0.25)
        assert lab_state.LabState.load(lab.lab_id).cgroups == list(limit.cgroups.values())
        for role, daemon in handle.daemons.items():
            path = Path(limit.cgroups[role])
            assert path.name == f"tunnelbench-{lab.lab_id}-{role}"
            if limit.version == 1:
                assert (path / "cpu.cfs_quota_us").read_text().strip() == "25000"
                assert (path / "cpu.cfs_period_us").read_text().strip() == "100000"
            else:
                assert (path / "cpu.max").read_text().split() == ["25000", "100000"]
            threads = {t.name for t in Path(f"/proc/{daemon.pid}/task").iterdir()}
            assert len(threads) > 1, "wireguard-go runs several threads"
            members = "cgroup.threads" if limit.version == 2 else "tasks"
            assert threads <= set((path / members).read_text().split())
    finally:
        lab.teardown()
    assert not any(Path(p).exists() for p in limit.cgroups.values())


def test_cpu_budget_caps_the_daemons_and_their_goodput():
    traffic_settings = TrafficSettings(duration=2, warmup=1)
    _, free_metrics, _ = measure(TrialConfig(tunnel=wireguard_go(None), traffic=traffic_settings))
    _, metrics, resolved = measure(TrialConfig(tunnel=wireguard_go(0.25), traffic=traffic_settings))
    assert resolved["cgroup_version"] in (1, 2)
    assert (resolved["cpu_quota_us"], resolved["cpu_period_us"]) == (25_000, 100_000)
    assert set(resolved["cgroups"]) == {"client", "gw"}
    for role in ("client", "gw"):
        assert metrics[f"proc.wireguard-go@{role}"] <= 30, metrics
    busiest_free = max(free_metrics[f"proc.wireguard-go@{r}"] for r in ("client", "gw"))
    assert busiest_free > 40, "unlimited, the daemon uses more than the budget"
    assert metrics["goodput_bps"] < 0.6 * free_metrics["goodput_bps"]
    assert not any(Path(p).exists() for p in resolved["cgroups"].values())


# --- UDP ---


# UDP loses packets at a queue it is forwarded through; a queue on the sending host itself
# pushes back on the socket instead. So these use site-to-site, whose WAN joins gateways.


def test_udp_loss_at_the_shapers_queue():
    """UDP at twice the WAN rate: the leaf pfifo drops about half, and the receiver's loss
    figure agrees with the qdisc's drop counter."""
    wan = LinkSettings(rate=50_000_000, queue=Queue.PFIFO, queue_limit=LIMIT)
    settings = TrafficSettings(protocol=Protocol.UDP, udp_rate=100_000_000, duration=1, warmup=0)
    lab = netns.build(LabSettings(topology=Topology.SITE_TO_SITE, wan=wan))
    try:
        result = Iperf3().run(lab, settings, StreamMode.SINGLE, lambda *_: closed_already)
        gateway = lab.chain.tunnel_ends[0]
        device = lab.wan_device(gateway)
        leaf = next(q for q in qdiscs(lab, gateway, device) if q["handle"] == "10:")
    finally:
        lab.teardown()
    assert result.retransmits is None and result.upload_bps is not None
    assert result.upload_bps < 55_000_000
    assert result.lost_pct is not None and 30 < result.lost_pct < 70
    assert result.jitter_ms is not None and result.jitter_ms >= 0
    assert leaf["drops"] > 0
    # The receiver's loss (warm-up excluded) cannot exceed what the queue dropped.
    assert result.lost_packets is not None and 0 < result.lost_packets <= leaf["drops"]


@pytest.mark.parametrize(
    ("direction", "mode", "streams"),
    [(Direction.DOWNLOAD, StreamMode.SINGLE, 1), (Direction.UPLOAD, StreamMode.PROCESSES, 2)],
)
def test_udp_trial_metrics(direction, mode, streams):
    lab_settings = LabSettings(topology=Topology.SITE_TO_SITE, wan=LinkSettings(rate=50_000_000))
    traffic_settings = TrafficSettings(
        protocol=Protocol.UDP,
        udp_rate=40_000_000,
        direction=direction,
        stream_mode=mode,
        streams=streams,
        duration=1,
        warmup=0,
    )
    traffic, metrics, resolved = measure(TrialConfig(lab=lab_settings, traffic=traffic_settings))
    assert resolved["processes"] == streams
    assert "retransmits" not in metrics and "congestion" not in resolved
    assert metrics["udp.jitter_ms"] >= 0
    if streams == 1:  # 40 of 50 Mbit/s: no loss to speak of
        assert metrics["udp.lost_pct"] < 5
    else:  # 80 into 50 Mbit/s
        assert 20 < metrics["udp.lost_pct"] < 60
        assert metrics["udp.lost_packets"] > 0
    for doc in traffic:
        assert doc["start"]["test_start"]["protocol"] == "UDP"
        assert doc["start"]["test_start"]["target_bitrate"] == 40_000_000
