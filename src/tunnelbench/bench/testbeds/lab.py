"""The namespace lab as a testbed: labs from a :class:`LabPool` (kept between trials of
one lab and tunnel, or built fresh), the in-process :class:`Sampler` over the measured
window, the routers' kernel counters held against the generator, and a tunnel daemon or
a namespace that vanished named as why the traffic stops.

The same testbed runs in a VM guest on the guest's kernel
(:mod:`tunnelbench.cli.guest`), its trials recording the guest as where they ran.
"""

import os
from collections.abc import Sequence
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from tunnelbench.analysis.steadiness import QueueReading, QueueSeries
from tunnelbench.bench import congestion
from tunnelbench.bench.figures import probe_metrics
from tunnelbench.bench.labpool import LabPool, lab_key
from tunnelbench.bench.labpool import Standing as LabStanding
from tunnelbench.bench.testbed import Resolution, Setup, Testbed
from tunnelbench.kinds import TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.lab.state import ProcessRecord, is_alive
from tunnelbench.model.plan import TrafficSettings, Trial, TrialConfig
from tunnelbench.model.records import NO_VM, Resolved, Where
from tunnelbench.probes import links, load
from tunnelbench.probes.backlog import WatchingProbe
from tunnelbench.probes.devices import DeviceNames
from tunnelbench.probes.rtt import RttProbe
from tunnelbench.probes.sampler import Sampler
from tunnelbench.probes.trial import ProbeContext, ProbeSet
from tunnelbench.system import probing
from tunnelbench.traffic.base import PathSignals, WindowClosed
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.vm.machine import IN_GUEST


def in_vm(config: TrialConfig) -> bool:
    """Whether ``config``'s lab runs in a VM started from here (not: in this guest)."""
    return config.lab.in_vm and os.environ.get(IN_GUEST) != "1"


def here() -> Where:
    """Where a trial on this machine's own kernel runs."""
    return Where(kernel_release=os.uname().release, virtualization=NO_VM)


class LabTestbed(Testbed):
    """Labs from ``labs``; ``where``: what the trials record about where they ran
    (:func:`here`, or the guest's)."""

    def __init__(self, labs: LabPool, where: Where | None = None) -> None:
        self.labs = labs
        self.where = where or here()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.labs.__exit__(kind, exc, tb)

    def expect(self, trials: list[Trial]) -> None:
        self.labs.expect([lab_key(t.config) for t in trials])

    def acquire(
        self, config: TrialConfig, resolution: Resolution | None, resolved: Resolved
    ) -> "LabSetup":
        assert resolution is not None  # the lab resolves every configuration beforehand
        spec = resolution.tunnel
        resolved.setup.implementation = resolution.implementation
        resolved.setup.version = resolution.version
        if config.tunnel.kind is not TunnelKind.NONE:
            resolved.setup.mtu = resolution.tunnel_mtu
        resolved.traffic.stream_mode = resolution.stream_mode
        resolved.setup.cipher = spec.cipher.value if spec.cipher is not None else None
        resolved.esp.implementation = spec.esp_implementation
        resolved.tunnel = TUNNELS.get(config.tunnel.kind).facts(spec)
        standing = self.labs.acquire(config, spec)
        try:
            _record(config, resolution, resolved, standing)
            return LabSetup(config, standing)
        except BaseException:
            self.labs.discard(standing)
            raise

    def release(self, setup: Setup, *, measured: bool) -> None:
        assert isinstance(setup, LabSetup)
        if measured:
            self.labs.release(setup.standing)
        else:
            self.labs.discard(setup.standing)


def _record(
    config: TrialConfig, resolution: Resolution, resolved: Resolved, standing: LabStanding
) -> None:
    """What the lab and its tunnel's set-up tell about the trial."""
    session = standing.session
    lab, handle = session.lab, session.handle
    found = resolved.lab
    found.id, found.families = lab.lab_id, config.lab.families
    found.fresh, found.trial = standing.fresh, standing.trials
    facts = lab.state.facts
    found.offloads, found.gso_max_segs = facts.offloads or None, facts.gso_max_segs or None
    found.placement, found.rps = facts.placement or None, facts.rps or None
    found.pppoe, found.rps_pppoe_wan = facts.pppoe or None, facts.rps_pppoe_wan or None
    if (budgets := facts.role_budgets) is not None:
        resolved.record_role_budgets(
            budgets.cgroup_version, budgets.cpu_period_us,
            budgets.role_quotas_us, budgets.role_cgroups,
        )  # fmt: skip
    resolved.record_setup(handle.found)
    found.unbundled_tunnel_devices = session.unbundled or None
    found.rps_tunnel_devices = session.steered or None
    if (limit := session.limit) is not None:
        resolved.record_cpu_limit(limit.version, limit.period_us, limit.quota_us, limit.cgroups)
    # What only set-up could tell (OpenVPN's data channel in the kernel or not).
    resolved.tunnel = TUNNELS.get(config.tunnel.kind).facts(resolution.tunnel, handle.found)


class LabSetup(Setup):
    """A lab standing for one trial, its namespaces the ends and the machines."""

    def __init__(self, config: TrialConfig, standing: LabStanding) -> None:
        self.config = config
        self.standing = standing
        self.lab: Lab = standing.session.lab
        self.handle = standing.session.handle
        self.ends = self.lab
        self.machines = self.lab
        names = DeviceNames.of(self.lab, self.handle.devices)
        self.context = ProbeContext(
            self.handle.devices, config.traffic, self.lab.settings.wan, names, self.lab.cgroups
        )
        self.sampler = Sampler()
        # Each daemon by its own name (charon, wireguard-go, openvpn), read while it
        # lives: the tunnel's implementation ("kernel" for ESP) names no process.
        self.daemons = {
            role: _comm(d.pid, self.handle.implementation)
            for role, d in self.handle.daemons.items()
        }
        self._stack = ExitStack()

    def __enter__(self) -> "LabSetup":
        self._stack.enter_context(self.lab.standing())
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stack.__exit__(kind, exc, tb)

    def open_window(self) -> None:
        lab, handle = self.lab, self.handle
        namespaces = load.namespace_inodes({role: lab.ns(role) for role in lab.chain.roles})
        self.sampler.lab(namespaces, tcp_roles=(lab.chain.client, lab.chain.server))
        self.sampler.add({f"{handle.implementation}@{r}": d.pid for r, d in handle.daemons.items()})
        self.sampler.start()

    def traffic(self, settings: TrafficSettings) -> TrafficSettings:
        # cubic unless the plan names one (bench.congestion: why, and why per socket).
        return congestion.lab_traffic(settings, probing.congestion().available)

    def window_opened(self, processes: dict[str, int], begin: float, end: float) -> WindowClosed:
        self.sampler.watch(processes, begin, end)
        return self.sampler.wait_closed

    def close_window(self) -> tuple[dict[str, float], dict[str, Any]]:
        probes = self.sampler.result()
        if probes is None:
            return {}, {}
        return probe_metrics(probes), {"probes": probes.to_dict()}

    def stop_window(self) -> None:
        self.sampler.stop()

    def broken(self) -> str | None:
        return broken_lab(self.lab, self.handle.daemons, self.daemons)

    def signals(self, probes: ProbeSet) -> PathSignals | None:
        return path_signals(probes)

    def check(self, metrics: dict[str, float], seconds: float) -> None:
        # The kernel's counters hold the generator's figure: every router forwarded it.
        links.check_forwarded(metrics, self.lab.chain.roles[1:-1], seconds)


def broken_lab(lab: Lab, daemons: dict[str, ProcessRecord], names: dict[str, str]) -> str | None:
    """What broke ``lab`` under the traffic, or None: a namespace deleted (every process
    in it, and the traffic through it, then fail with symptoms of their own), or a tunnel
    daemon (``daemons``, named by ``names``, by role) that died. Polled by every wait of
    a trial: a stat per namespace."""
    for role in lab.chain.roles:
        if not (load.NETNS_DIR / lab.ns(role)).exists():
            return f"namespace {lab.ns(role)} ({role}) vanished during the trial"
    for role, daemon in daemons.items():
        if not is_alive(daemon):
            return f"tunnel daemon {names[role]} on {role} (pid {daemon.pid}) died during the trial"
    return None


def _comm(pid: int, fallback: str) -> str:
    """A process's name as the kernel keeps it (``charon``), or ``fallback``."""
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip() or fallback
    except OSError:
        return fallback


def path_signals(probe_set: ProbeSet) -> PathSignals | None:
    """What an "auto" warm-up watches (:mod:`tunnelbench.traffic.warmup`): the trial's
    loaded pings, and the queues' readings where a probe reads them: the WAN queues'
    backlog (the qdisc probe) and the senders' windows (the TCP probe)."""
    pings = [p.signals() for p in probe_set.probes if isinstance(p, RttProbe)]
    watched = [p for p in probe_set.probes if isinstance(p, WatchingProbe)]
    rtt = pings[0] if pings else None
    if not watched:
        return rtt

    def queues() -> QueueSeries:
        found: dict[str, Sequence[QueueReading]] = {}
        for probe in watched:
            found |= probe.queue_readings()
        return found

    return PathSignals(rtt.loaded_rtt if rtt else no_pings, queues)


def no_pings() -> list[tuple[float, float]]:
    return []
