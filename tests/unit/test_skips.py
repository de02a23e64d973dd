"""The reasons :func:`tunnelbench.bench.skips.unmet` gives, one rule at a time, on constructed
machines: one that has everything, and ones that lack exactly one thing."""

from dataclasses import replace
from typing import Any

import pytest

from tunnelbench.bench import capabilities as c
from tunnelbench.bench import skips
from tunnelbench.kinds import Generator, Queue, Shaper, TunnelKind
from tunnelbench.model.plan import (
    LabSettings,
    LinkSettings,
    Offloads,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
)
from tunnelbench.system.probing import Capabilities, CgroupCpu, Check, Congestion, Program

UNKNOWN_QDISC = "Specified qdisc kind is unknown"
UNKNOWN_LINK = "Unknown device type"


# --- unmet: one rule at a time, on a machine that has everything ---

YES = Check(True)
FULL = Capabilities(
    kernel="6.1.0",
    euid=0,
    netns=Check(True, "as root"),
    links={kind: YES for kind in c.link_probes()},
    qdiscs={kind: YES for kind in ("pfifo", "pfifo_fast", "fq_codel", "cake", "fq", "tbf", "htb")},
    esp={},
    congestion=Congestion(True, "reno bbr cubic", ("reno", "bbr", "cubic"), (), "cubic"),
    cgroup=CgroupCpu(True, "cgroup v2 at /sys/fs/cgroup", version=2, path="/sys/fs/cgroup"),
    programs={
        name: Program(True, f"{name} 1.0", path=f"/usr/bin/{name}", version=f"{name} 1.0")
        for name in c.program_names()
    },
    cpus=(0, 1),
)
NOT_PROBED = Check(None, "cannot create a network namespace: Operation not permitted")


def without(caps: Capabilities, section: str, name: str, check: Check) -> Capabilities:
    changes: dict[str, Any] = {section: {**getattr(caps, section), name: check}}
    return replace(caps, **changes)


def config(
    *,
    tunnel: TunnelSettings | None = None,
    wan: LinkSettings | None = None,
    traffic: TrafficSettings | None = None,
    **lab: Any,
) -> TrialConfig:
    return TrialConfig(
        lab=LabSettings(wan=wan or LinkSettings(), **lab),
        tunnel=tunnel or TunnelSettings(),
        traffic=traffic or TrafficSettings(),
    )


WG = TunnelKind.WIREGUARD
NO_WG = without(FULL, "links", "wireguard", Check(False, UNKNOWN_LINK))
NO_WG_GO = without(
    FULL, "programs", "wireguard-go", Program(False, "wireguard-go is not installed")
)


def test_everything_runs_on_a_full_machine():
    assert skips.unmet(config(), FULL) is None
    rich = config(
        tunnel=TunnelSettings(kind=WG, cpu_budget=0.5, implementation="wireguard-go"),
        wan=LinkSettings(rate=10**9, shaper=Shaper.HTB, queue=Queue.CAKE),
        traffic=TrafficSettings(congestion="bbr"),
        rps_cpus="3",
        offloads=Offloads(gro=False),
    )
    assert skips.unmet(rich, FULL) is None


@pytest.mark.parametrize(
    ("caps", "trial", "reason"),
    [
        (
            without(FULL, "qdiscs", "fq_codel", Check(False, UNKNOWN_QDISC)),
            config(wan=LinkSettings(queue=Queue.FQ_CODEL)),
            "lab.wan.queue: fq_codel is not available in this kernel "
            "(Specified qdisc kind is unknown)",
        ),
        (
            without(FULL, "qdiscs", "htb", Check(False, UNKNOWN_QDISC)),
            config(wan=LinkSettings(rate=10**8, shaper=Shaper.HTB)),
            "lab.wan.shaper: htb is not available in this kernel (Specified qdisc kind is unknown)",
        ),
        (
            without(FULL, "qdiscs", "pfifo", Check(False, UNKNOWN_QDISC)),
            config(wan=LinkSettings(rate=10**8)),
            "lab.wan.queue: pfifo is not available in this kernel "
            "(Specified qdisc kind is unknown)",
        ),
        (
            without(FULL, "links", "vxlan", Check(False, UNKNOWN_LINK)),
            config(tunnel=TunnelSettings(kind=TunnelKind.VXLAN)),
            "tunnel.kind: vxlan links cannot be created here (Unknown device type)",
        ),
        (
            NO_WG,
            config(tunnel=TunnelSettings(kind=WG, implementation="kernel")),
            "tunnel.implementation: kernel WireGuard is not available (Unknown device type)",
        ),
        (
            NO_WG_GO,
            config(tunnel=TunnelSettings(kind=WG, implementation="wireguard-go")),
            "tunnel.implementation: wireguard-go is not installed: wireguard-go (the pinned "
            "wireguard-go, built into .tools/bin by `make setup`) was not found",
        ),
        (
            without(FULL, "programs", "boringtun-cli", Program(False, "not installed")),
            config(tunnel=TunnelSettings(kind=WG, implementation="boringtun", cpu_budget=0.5)),
            "tunnel.implementation: boringtun is not installed: boringtun-cli (boringtun, "
            "built into .tools/bin by `make setup`) was not found",
        ),
        (
            without(FULL, "programs", "/usr/bin/wireguard-go", Program(False, "not installed")),
            config(tunnel=TunnelSettings(kind=WG, implementation="wireguard-go-debian")),
            "tunnel.implementation: wireguard-go-debian is not installed: /usr/bin/wireguard-go "
            "(Debian's wireguard-go package: apt-get install wireguard-go) was not found",
        ),
        (
            without(FULL, "programs", "wg", Program(False, "not installed")),
            config(tunnel=TunnelSettings(kind=WG, implementation="boringtun")),
            "tunnel.implementation: boringtun is not installed: wg (WireGuard configuration, "
            "from wireguard-tools) was not found",
        ),
        (
            # "auto" is kernel, else the pinned wireguard-go; never Debian's or boringtun,
            # which this machine has.
            without(NO_WG, "programs", "wireguard-go", Program(False, "not installed")),
            config(tunnel=TunnelSettings(kind=WG)),
            "tunnel.implementation: auto finds neither kernel WireGuard (Unknown device type) "
            "nor wireguard-go (not installed)",
        ),
        (
            FULL,
            config(traffic=TrafficSettings(congestion="bbr2")),
            "traffic.congestion: bbr2 is not available; this kernel has reno, bbr, cubic",
        ),
        (
            FULL,
            config(tunnel=TunnelSettings(kind=WG, cpu_budget=0.5)),
            "tunnel.cpu_budget: needs a userspace tunnel daemon; wireguard resolves to kernel here",
        ),
        (
            FULL,
            config(tunnel=TunnelSettings(kind=WG, implementation="kernel", cpu_budget=0.5)),
            "tunnel.cpu_budget: needs a userspace tunnel daemon; tunnel.implementation ="
            " 'kernel' runs wireguard in the kernel",
        ),
        (
            FULL,
            config(tunnel=TunnelSettings(kind=TunnelKind.VXLAN, cpu_budget=0.5)),
            "tunnel.cpu_budget: needs a userspace tunnel daemon; vxlan is a kernel tunnel",
        ),
        (
            replace(NO_WG, cgroup=CgroupCpu(False, "cgroup v2 at /sys/fs/cgroup has hugetlb")),
            config(tunnel=TunnelSettings(kind=WG, cpu_budget=0.5)),
            "tunnel.cpu_budget: no cgroup CPU controller (cgroup v2 at /sys/fs/cgroup has hugetlb)",
        ),
        (
            FULL,
            config(rps_cpus="4"),
            "lab.rps_cpus: mask 0x4 names CPUs this machine does not have (2 online)",
        ),
        (
            without(FULL, "programs", "iperf3", Program(False, "iperf3 is not installed")),
            config(),
            "traffic.generator: iperf3 is not installed",
        ),
        (
            without(FULL, "programs", "iperf", Program(False, "iperf is not installed")),
            config(traffic=TrafficSettings(generator=Generator.IPERF2)),
            "traffic.generator: iperf2 needs iperf, which is not installed",
        ),
    ],
)
def test_unmet_names_the_setting_and_the_reason(caps, trial, reason):
    assert skips.unmet(trial, caps) == reason


def test_offloads_need_no_ethtool_program():
    # The namespace lab sets them from a thread inside each namespace (system.netdev).
    caps = without(FULL, "programs", "ethtool", Program(False, "ethtool is not installed"))
    trial = config(offloads=Offloads(tso=False), wan=LinkSettings(rate=10**8))
    assert skips.unmet(trial, caps) is None


def test_what_is_available_is_not_a_reason():
    # Each of the machines above runs the configuration when the setting is left alone.
    assert skips.unmet(config(tunnel=TunnelSettings(kind=WG)), NO_WG) is None  # wireguard-go
    assert skips.unmet(config(tunnel=TunnelSettings(kind=WG)), NO_WG_GO) is None  # kernel
    assert skips.unmet(config(rps_cpus="0x3"), FULL) is None
    assert skips.unmet(config(offloads=Offloads()), replace(FULL, programs={})) is None
    assert (
        skips.unmet(config(wan=LinkSettings(shaper=Shaper.HTB)), replace(FULL, qdiscs={})) is None
    )
    loadable = replace(FULL, congestion=replace(FULL.congestion, loadable=("bbr2",)))
    assert skips.unmet(config(traffic=TrafficSettings(congestion="bbr2")), loadable) is None


def test_not_probed_is_never_a_reason_to_skip():
    blind = replace(
        FULL,
        netns=Check(False, NOT_PROBED.detail),
        links={kind: NOT_PROBED for kind in FULL.links},
        qdiscs={kind: NOT_PROBED for kind in FULL.qdiscs},
        congestion=Congestion(None, "cannot read tcp_available_congestion_control"),
        cgroup=CgroupCpu(None, "not probed"),
        programs={name: Program(None, "not probed") for name in c.program_names()},
        cpus=(),
    )
    demanding = [
        config(wan=LinkSettings(rate=10**8, shaper=Shaper.HTB, queue=Queue.FQ_CODEL)),
        config(tunnel=TunnelSettings(kind=WG, implementation="kernel")),
        config(tunnel=TunnelSettings(kind=WG, cpu_budget=0.5)),
        config(tunnel=TunnelSettings(kind=TunnelKind.VXLAN)),
        config(
            traffic=TrafficSettings(congestion="bbr2"), rps_cpus="ff", offloads=Offloads(gro=True)
        ),
    ]
    assert [skips.unmet(trial, blind) for trial in demanding] == [None] * len(demanding)


def test_resolve_follows_the_runner():
    auto = TunnelSettings(kind=WG)
    assert skips.resolve(auto, FULL) == "kernel"
    assert skips.resolve(auto, NO_WG) == "wireguard-go"
    assert skips.resolve(auto, without(FULL, "links", "wireguard", NOT_PROBED)) is None
    assert (
        skips.resolve(TunnelSettings(kind=WG, implementation="wireguard-go"), FULL)
        == "wireguard-go"
    )
    no_pinned = without(NO_WG, "programs", "wireguard-go", Program(False, "not installed"))
    assert skips.resolve(auto, no_pinned) is None  # not Debian's, nor boringtun
    for name in ("wireguard-go-debian", "boringtun"):
        assert skips.resolve(TunnelSettings(kind=WG, implementation=name), NO_WG) == name
        budget = config(tunnel=TunnelSettings(kind=WG, implementation=name, cpu_budget=0.5))
        assert skips.unmet(budget, NO_WG) is None  # a userspace daemon has a budget
