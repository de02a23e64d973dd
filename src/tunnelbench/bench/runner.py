"""Executes an experiment: labs, traffic, probes, and the store.

This is the only place that turns a plan into system changes. Everything a trial needs
(root, programs, implementations, kernel features) is checked before the first lab is
built: what this machine lacks is an error for a command-line request and a skipped
trial, with its reason, for a plan. A trial that fails is stored as failed with its cause
and the run goes on; Ctrl-C keeps every finished trial, tears the lab down and marks the
run interrupted, and ``--resume`` runs only the trials not stored yet.
"""

import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tunnelbench.analysis import precision
from tunnelbench.analysis.steadiness import goodput_thirds, goodput_trend, window_rising
from tunnelbench.bench import capabilities, congestion, environment, guest_trials, skips
from tunnelbench.bench.labpool import KEEP, LabPool, lab_key
from tunnelbench.bench.progress import Progress
from tunnelbench.bench.sink import TrialSink, store_trial
from tunnelbench.bench.store import Store
from tunnelbench.errors import LabError, StorageError, UserError
from tunnelbench.kinds import Order, StreamMode, TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.lab.state import ProcessRecord, is_alive, process_start_time
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import (
    Experiment,
    TrafficSettings,
    Trial,
    TrialConfig,
    VmSettings,
    expand,
)
from tunnelbench.model.records import NO_VM, Resolved, RunRecord, RunStatus, TrialStatus, Where
from tunnelbench.probes import links, load, new_probe_set
from tunnelbench.probes.devices import DeviceNames
from tunnelbench.probes.qdisc import QdiscProbe
from tunnelbench.probes.rtt import RttProbe
from tunnelbench.probes.sampler import ProbeResult, Sampler
from tunnelbench.probes.trial import ProbeContext, ProbeReadings, ProbeSet
from tunnelbench.system import interrupts, probing, programs
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.traffic import TrafficResult
from tunnelbench.traffic.base import PathSignals, WindowClosed
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.base import TunnelSpec
from tunnelbench.vm import machine
from tunnelbench.vm.kernels import Kernel, locate
from tunnelbench.vm.machine import IN_GUEST

log = logging.getLogger("tunnelbench.bench.runner")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise UserError(f"{what} needs root (it creates network namespaces); run it as root")


@dataclass(frozen=True)
class Resolution:
    """What a configuration's "auto" settings became on this machine."""

    tunnel: TunnelSpec
    version: str
    stream_mode: StreamMode

    @property
    def implementation(self) -> str:
        return self.tunnel.implementation

    @property
    def tunnel_mtu(self) -> int:
        return self.tunnel.mtu


@dataclass(frozen=True)
class Prepared:
    """An experiment checked against this machine, ready to execute."""

    experiment: Experiment  # with its seed fixed, if shuffled
    trials: list[Trial]
    resolutions: dict[str, Resolution]  # config key -> how it runs here
    skipped: dict[str, str]  # config key -> why this machine cannot run it
    kernels: dict[str, Kernel] = field(default_factory=dict)  # lab.kernel -> fetched


@dataclass
class TrialOutcome:
    trial: Trial
    status: TrialStatus
    error: str | None
    metrics: dict[str, float] = field(default_factory=dict)


def prepare(experiment: Experiment, *, strict: bool) -> Prepared:
    """Check every configuration can run here and resolve its "auto" settings.

    With ``strict`` (a command-line request) anything missing raises
    :class:`UserError`; otherwise (a plan) the configuration is skipped with the reason.
    Raises :class:`UserError` when nothing at all could run.
    """
    if experiment.order is Order.SHUFFLED and experiment.seed is None:
        experiment = replace(experiment, seed=secrets.randbelow(2**32))
    trials = expand(experiment)
    resolutions, skipped = check(trials)
    kernels: dict[str, Kernel] = {}
    for trial in trials:
        spec, key = trial.config.lab.kernel, trial.config.key()
        if not in_vm(trial.config) or spec in kernels or key in skipped:
            continue
        try:
            kernels[spec] = locate(spec)
        except UserError as exc:
            if strict:
                raise
            for other in trials:
                if other.config.lab.kernel == spec:
                    skipped[other.config.key()] = str(exc)
                    resolutions.pop(other.config.key(), None)
    if strict and skipped:
        raise UserError(next(iter(skipped.values())))
    if not resolutions and not kernels:
        first = next(iter(skipped.values()), "no configurations")
        raise UserError(f"nothing to run: this machine can run no configuration ({first})")
    return Prepared(experiment, trials, resolutions, skipped, kernels)


def check(trials: list[Trial]) -> tuple[dict[str, Resolution], dict[str, str]]:
    """How each configuration runs here, and why the others cannot (by config key).

    Without side effects: probes run in anonymous namespaces that vanish with them. A
    configuration on another kernel is checked here for the VM and for what its guest
    shares with this machine (its programs: it boots on this root; its vCPUs), so that
    ``plan show`` finds those skips; its guest resolves and checks the rest against its
    own kernel (:mod:`tunnelbench.cli.guest`), where what is missing skips its trials
    with the reason. What no machine could run is a plan's error before this
    (:mod:`tunnelbench.bench.conflicts`).
    """
    caps = capabilities.probe() if any(not in_vm(t.config) for t in trials) else None
    resolutions: dict[str, Resolution] = {}
    skipped: dict[str, str] = {}
    for trial in trials:
        interrupts.check()  # between trials: a signal stops the run before the next
        key = trial.config.key()
        if key in resolutions or key in skipped:
            continue
        if in_vm(trial.config):
            try:
                machine.vng()
            except UserError as exc:
                skipped[key] = str(exc)
                continue
            if reason := skips.unmet(trial.config, skips.in_guest(trial.config.lab.vm)):
                skipped[key] = reason
            continue  # resolved and checked in its guest, against the guest's kernel
        try:
            resolution = resolve(trial.config)
            assert caps is not None
            reason = skips.unmet(trial.config, caps)
        except UserError as exc:
            reason = str(exc)
        if reason is None:
            resolutions[key] = resolution
        else:
            skipped[key] = reason
    return resolutions, skipped


def in_vm(config: TrialConfig) -> bool:
    """Whether ``config``'s lab runs in a VM started from here (not: in this guest)."""
    return config.lab.in_vm and os.environ.get(IN_GUEST) != "1"


def resolve(config: TrialConfig) -> Resolution:
    """How ``config`` runs here: its tunnel's "auto" settings resolved and every program
    it needs found; a :class:`UserError` names what is missing."""
    tunnel = TUNNELS.get(config.tunnel.kind)
    generator = GENERATORS.get(config.traffic.generator)
    spec = resolve_tunnel(config)
    for program, purpose in generator.programs():
        programs.require(program, purpose)
    return Resolution(
        tunnel=spec,
        version=tunnel.version(spec.implementation),
        stream_mode=generator.resolve_mode(config.traffic),
    )


def resolve_tunnel(config: TrialConfig) -> TunnelSpec:
    """The tunnel of ``config`` as it runs here (a run's and ``lab up``'s): "auto"
    resolved, the traffic's family carried, its programs found."""
    tunnel = TUNNELS.get(config.tunnel.kind)
    spec = tunnel.resolve(config.tunnel, config.lab.wan.ip_mtu)
    family = config.traffic.family
    carried = tunnel.carried_families(config.lab.families, spec.mtu or 0)
    if family in tunnel.families and family not in carried:  # else refused by its kind
        raise UserError(
            f"traffic.family: IPv{family} cannot cross this lab: IPv6 needs an MTU of at"
            f" least 1280 on every link and in the tunnel (links {config.lab.wan.mtu}"
            f"/{config.lab.lan_mtu}, tunnel {spec.mtu})"
        )
    for program, purpose in tunnel.programs(spec.implementation):
        programs.require(program, purpose)
    return spec


def preflight(verb: str = "run") -> None:
    """Privileges and the programs every lab needs (``verb``: what the error names)."""
    require_root(f"tunnelbench {verb}")
    for program in ("ip", "tc", "sysctl"):
        programs.require(program, "building the lab")
    programs.require("ping", "the round-trip probe")


def owner() -> dict[str, int]:
    """This process, as a run's owner: PID and start time (a reused PID is not us)."""
    return {"pid": os.getpid(), "start_time": process_start_time(os.getpid()) or 0}


def start(
    prepared: Prepared, store: Store, *, command_line: str, lock: dict[str, Any] | None = None
) -> int:
    """Record a new run of a prepared experiment; return its id. ``lock``: how the run
    holds the measurement lock (:mod:`tunnelbench.bench.measurement_lock`), for its environment."""
    versions = {}
    for trial in prepared.trials:
        resolution = prepared.resolutions.get(trial.config.key())
        # A guest resolves "auto" on its own kernel; its trials record what it chose.
        if resolution is not None and not in_vm(trial.config):
            name = f"{trial.config.tunnel.kind.value}/{resolution.implementation}"
            versions[name] = resolution.version
    for kind in {t.config.traffic.generator for t in prepared.trials}:
        versions[kind.value] = GENERATORS.get(kind).version()
    facts = environment.collect(versions)
    if lock is not None:
        facts["measurement_lock"] = lock
    return store.start_run(command_line, prepared.experiment.to_dict(), facts, owner())


def execute(
    prepared: Prepared, store: Store, run_id: int, *, progress: Progress | None = None
) -> str:
    """Run every trial of the run not stored yet, then, for an adaptive experiment, the
    rounds its configurations still need; return the run's final status."""
    stored = {t.seq for t in store.trials(run_id)}
    pending = [t for t in prepared.trials if t.seq not in stored]
    planned = {t.seq for t in prepared.trials}
    total = len(prepared.trials) + len(stored - planned)  # + rounds already added
    adaptive = prepared.experiment.adaptive is not None
    shown = progress or Progress()
    shown.run_started(run_id, total, pending, growing=adaptive)

    def body() -> None:
        with LabPool(keep=0 if prepared.experiment.fresh_labs else KEEP) as labs:
            run_trials(prepared, store, run_id, pending, shown, labs)
            if adaptive:
                _run_extra_rounds(prepared, store, run_id, shown, labs)

    return guarded(store, run_id, body, lambda status: shown.run_finished(run_id, status))


def guarded(
    store: Store, run_id: int, body: Callable[[], None], ended: Callable[[RunStatus], None]
) -> RunStatus:
    """Run ``body`` (a run's trials) and mark the run with how it ended: complete,
    interrupted (Ctrl-C) or failed; ``ended`` is told before the exception goes on."""
    try:
        body()
        # A signal that came while the last trial was stored (or in a finalizer, where
        # nothing checked) stops the run here, rather than marking it complete.
        interrupts.check()
    except KeyboardInterrupt:
        store.finish_run(run_id, RunStatus.INTERRUPTED)
        ended(RunStatus.INTERRUPTED)
        raise
    except StorageError as exc:
        # The store takes no more: the run stops, marked failed (when it still can be)
        # with the fault as its reason; the error says what is kept and what to do.
        fault = store.abandon_run(run_id, exc)
        ended(RunStatus.FAILED)
        raise fault from None
    except BaseException:
        store.finish_run(run_id, RunStatus.FAILED)
        ended(RunStatus.FAILED)
        raise
    store.finish_run(run_id, RunStatus.COMPLETE)
    ended(RunStatus.COMPLETE)
    return RunStatus.COMPLETE


def run_trials(
    prepared: Prepared,
    store: TrialSink,
    run_id: int,
    trials: list[Trial],
    progress: Progress,
    labs: LabPool,
    *,
    where: Where | None = None,
) -> None:
    """Run ``trials`` in order; those on another kernel afterwards, one VM for each
    kernel and guest size (:mod:`tunnelbench.bench.guest_trials`). ``where``: what the
    trials record about where they ran (:func:`here`)."""
    facts = where or here()
    labs.expect(
        [
            lab_key(t.config)
            for t in trials
            if t.config.key() not in prepared.skipped and not in_vm(t.config)
        ]
    )
    guests: dict[tuple[str, VmSettings], list[Trial]] = {}
    for trial in trials:
        key = trial.config.key()
        if key in prepared.skipped:
            _store_skipped(store, run_id, trial, prepared.skipped[key])
            progress.trial_finished(trial, TrialStatus.SKIPPED, prepared.skipped[key], None)
            continue
        if in_vm(trial.config):
            guests.setdefault((trial.config.lab.kernel, trial.config.lab.vm), []).append(trial)
            continue
        progress.trial_started(trial)
        outcome = run_trial(store, run_id, trial, prepared.resolutions[key], labs, facts)
        progress.trial_finished(
            trial, outcome.status, outcome.error or "", outcome.metrics.get(metric.GOODPUT.name)
        )
    for (spec, vm), group in guests.items():
        assert isinstance(store, Store)
        kernel = prepared.kernels[spec]
        guest_trials.run(prepared.experiment, store, run_id, kernel, vm, group, progress)


def here() -> Where:
    """Where a trial on this machine's own kernel runs."""
    return Where(kernel_release=os.uname().release, virtualization=NO_VM)


def _run_extra_rounds(
    prepared: Prepared, store: Store, run_id: int, progress: Progress, labs: LabPool
) -> None:
    """Add rounds until every configuration meets the precision target or reaches the
    maximum. Each decision is made from the stored trials alone (so ``--resume``
    continues where the run stopped) and recorded with the run before the round runs."""
    experiment = prepared.experiment
    assert experiment.adaptive is not None
    target = experiment.adaptive.target_pct
    while True:
        trials = store.trials(run_id)
        attempts = precision.attempts_by_config(trials)
        standing = precision.assess_all(experiment, attempts)
        store.set_precision(run_id, {key: p.to_dict() for key, p in standing.items()})
        next_seq = max((t.seq for t in trials), default=0) + 1
        round_ = precision.next_round(
            experiment, attempts, next_seq=next_seq, exclude=prepared.skipped
        )
        if not round_:
            break
        progress.round_added(
            round_, {t.config.key(): standing[t.config.key()] for t in round_}, target
        )
        run_trials(prepared, store, run_id, round_, progress, labs)
    configs = {t.config_key: TrialConfig.from_dict(t.config) for t in trials}
    progress.precision_final([(configs[key], p) for key, p in standing.items()], target)


def resumable(store: Store, ref: str) -> tuple[int, Experiment]:
    """The id and experiment of a stopped run, checked to be safe to continue.

    Every stored trial must be the one :func:`expand` puts at its place; in an adaptive
    run, trials after the planned ones are the added rounds' and only need to be of the
    experiment's configurations.
    """
    run = stopped(store, ref)
    if run.tune is not None:
        raise UserError(
            f"--resume: run {run.id} is a tuning session; `tunnelbench tune --resume {run.id}`"
            " continues it"
        )
    experiment = Experiment.from_dict(run.experiment)
    planned = expand(experiment)
    expected = {t.seq: t.config.key() for t in planned}
    known = {t.config.key() for t in planned} if experiment.adaptive is not None else set()
    for trial in store.trials(run.id):
        fits = expected.get(trial.seq) == trial.config_key or (
            trial.seq > len(planned) and trial.config_key in known
        )
        if not fits:
            raise UserError(
                f"--resume: run {run.id}'s stored trial {trial.seq} does not match its"
                " experiment (stored by another tunnelbench version?); start a new run"
            )
    return run.id, experiment


def stopped(store: Store, ref: str) -> RunRecord:
    """The run ``ref``, checked to have stopped before it was complete."""
    run = store.run(ref)
    if run.status is RunStatus.COMPLETE:
        raise UserError(f"--resume: run {run.id} is complete; there is nothing to resume")
    if run.status is RunStatus.RUNNING and run.owner and _owner_alive(run.owner):
        raise UserError(f"--resume: run {run.id} is still running (pid {run.owner['pid']})")
    return run


def _owner_alive(record: dict[str, int]) -> bool:
    return process_start_time(record["pid"]) == record["start_time"]


def _store_skipped(store: TrialSink, run_id: int, trial: Trial, reason: str) -> None:
    store_trial(
        store, run_id, trial, resolved=Resolved(), status=TrialStatus.SKIPPED, error=reason,
        started_at=time.time(), metrics={}, artifacts={},
    )  # fmt: skip


def run_trial(
    store: TrialSink,
    run_id: int,
    trial: Trial,
    resolution: Resolution,
    labs: LabPool,
    where: Where,
) -> TrialOutcome:
    """Measure one trial in a lab from ``labs`` (kept or fresh) and store what happened;
    ``where``: where it ran (:func:`here`, or the guest's)."""
    config = trial.config
    started = time.time()
    spec = resolution.tunnel
    resolved = Resolved(
        tunnel_implementation=resolution.implementation,
        tunnel_version=resolution.version,
        tunnel_mtu=resolution.tunnel_mtu if config.tunnel.kind is not TunnelKind.NONE else None,
        stream_mode=resolution.stream_mode,
        tunnel_cipher=spec.cipher.value if spec.cipher is not None else None,
        esp_implementation=spec.esp_implementation,
        tunnel=TUNNELS.get(config.tunnel.kind).facts(spec),
        generator=GENERATORS.get(config.traffic.generator).facts(),
    )
    resolved.record_where(where)
    metrics: dict[str, float] = {}
    artifacts: dict[str, Any] = {}
    try:
        traffic, probes, readings = _measure(config, resolution, resolved, labs)
        metrics = trial_metrics(traffic, probes, readings)
        metrics |= warmup_fallback(config.traffic, traffic)
        artifacts = traffic_artifacts(config.traffic, traffic)
        if probes is not None:
            artifacts["probes"] = probes.to_dict()
        artifacts["probe_readings"] = readings.raw()
        status, error = TrialStatus.OK, None
    except LabError as exc:
        status, error = TrialStatus.FAILED, str(exc)
        log.warning("trial %d failed: %s", trial.seq, error)
    store_trial(
        store, run_id, trial, resolved=resolved, status=status, error=error,
        started_at=started, metrics=metrics, artifacts=artifacts,
    )  # fmt: skip
    return TrialOutcome(trial, status, error, metrics)


def _measure(
    config: TrialConfig, resolution: Resolution, resolved: Resolved, labs: LabPool
) -> tuple[TrafficResult, ProbeResult | None, ProbeReadings]:
    generator = GENERATORS.get(config.traffic.generator)
    standing = labs.acquire(config, resolution.tunnel)
    session, sampler, measured = standing.session, Sampler(), False
    lab, handle = session.lab, session.handle
    resolved.lab_id = lab.lab_id
    resolved.lab_families = config.lab.families
    resolved.lab_fresh, resolved.lab_trial = standing.fresh, standing.trials
    facts = lab.state.facts
    resolved.offloads, resolved.gso_max_segs = facts.offloads or None, facts.gso_max_segs or None
    resolved.placement, resolved.rps = facts.placement or None, facts.rps or None
    resolved.pppoe, resolved.rps_pppoe_wan = facts.pppoe or None, facts.rps_pppoe_wan or None
    if (budgets := facts.role_budgets) is not None:
        resolved.record_role_budgets(
            budgets.cgroup_version, budgets.cpu_period_us,
            budgets.role_quotas_us, budgets.role_cgroups,
        )  # fmt: skip
    resolved.record_setup(handle.found)
    resolved.unbundled_tunnel_devices = session.unbundled or None
    resolved.rps_tunnel_devices = session.steered or None
    if (limit := session.limit) is not None:
        resolved.record_cpu_limit(limit.version, limit.period_us, limit.quota_us, limit.cgroups)
    # What only set-up could tell (OpenVPN's data channel in the kernel or not).
    resolved.tunnel = TUNNELS.get(config.tunnel.kind).facts(resolution.tunnel, handle.found)
    try:
        with lab.standing():
            namespaces = load.namespace_inodes({role: lab.ns(role) for role in lab.chain.roles})
            sampler.lab(namespaces, tcp_roles=(lab.chain.client, lab.chain.server))
            sampler.add({f"{handle.implementation}@{r}": d.pid for r, d in handle.daemons.items()})
            sampler.start()
            duration = config.traffic.duration
            probe_set = new_probe_set()

            def on_started(processes: dict[str, int], begin: float) -> WindowClosed:
                sampler.watch(processes, begin, begin + duration)
                probe_set.started(begin)
                return sampler.wait_closed

            # Each daemon by its own name (charon, wireguard-go, openvpn), read while it
            # lives: the tunnel's implementation ("kernel" for ESP) names no process.
            daemons = {
                role: _comm(d.pid, handle.implementation) for role, d in handle.daemons.items()
            }

            def dead_daemon() -> str | None:
                return broken_lab(lab, handle.daemons, daemons)

            names = DeviceNames.of(lab, handle.devices)
            context = ProbeContext(
                handle.devices, config.traffic, lab.settings.wan, names, lab.cgroups
            )
            probe_set.before(lab, context)
            # cubic unless the plan names one (bench.congestion: why, and why per socket).
            settings = congestion.lab_traffic(config.traffic, probing.congestion().available)
            traffic = generator.run(
                lab,
                settings,
                resolution.stream_mode,
                on_started,
                dead_daemon,
                path_signals(probe_set),
            )
            probes = sampler.result()
            if (reason := dead_daemon()) is not None:
                raise LabError(reason)
            readings = probe_set.after()
            # The kernel's counters hold the generator's figure: every router forwarded it.
            routers = lab.chain.roles[1:-1]
            seconds = config.traffic.duration
            links.check_forwarded(traffic_metrics(traffic) | readings.metrics, routers, seconds)
            resolved.processes = traffic.processes
            # What the senders reported (iperf3), else what they were given (iperf2
            # reports none).
            resolved.congestion = traffic.congestion or settings.congestion
            requested = settings.congestion
            if None not in (traffic.congestion, requested) and traffic.congestion != requested:
                named = "traffic.congestion" if config.traffic.congestion else "the lab's default"
                raise LabError(
                    f"{named}: {requested!r} was set, but the senders used {traffic.congestion!r}"
                )
            measured = True
            return traffic, probes, readings
    finally:
        sampler.stop()
        if measured:
            labs.release(standing)
        else:
            labs.discard(standing)


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
    loaded pings, and the WAN queues' backlog where the queue probe reads it."""
    pings = [p.signals() for p in probe_set.probes if isinstance(p, RttProbe)]
    queues = [p for p in probe_set.probes if isinstance(p, QdiscProbe)]
    rtt = pings[0] if pings else None
    if not queues:
        return rtt
    return PathSignals(rtt.loaded_rtt if rtt else no_pings, queues[0].queue_readings)


def no_pings() -> list[tuple[float, float]]:
    return []


def warmup_fallback(settings: TrafficSettings, traffic: TrafficResult) -> dict[str, float]:
    """An "auto" warm-up the generator could not end on evidence: its fixed fallback."""
    if settings.warmup is None and traffic.warmup is None:
        return {metric.WARMUP_S.name: settings.fixed_warmup}
    return {}


def traffic_artifacts(settings: TrafficSettings, traffic: TrafficResult) -> dict[str, Any]:
    """The generator's raw output under its name ("iperf3": JSON documents, "iperf2":
    each process's command line and CSV output), its intervals and how its warm-up ended,
    as every trial stores them (a real hosts' trial too)."""
    artifacts: dict[str, Any] = {
        settings.generator.value: traffic.raw,
        "intervals": traffic.intervals_bps,
    }
    if traffic.warmup is not None:
        artifacts["warmup"] = {
            "seconds": round(traffic.warmup.seconds, 3),
            "steady": traffic.warmup.steady,
            "reason": traffic.warmup.reason,
        }
    return artifacts


def trial_metrics(
    traffic: TrafficResult, probes: ProbeResult | None, readings: ProbeReadings
) -> dict[str, float]:
    """The numbers stored for one trial; names are stable, reports read them by name."""
    metrics = traffic_metrics(traffic) | readings.metrics
    if probes is not None:
        metrics |= probe_metrics(probes)
    # The window's own verdict, stored: no trial is kept as steady that its window calls
    # rising.
    metrics[metric.WINDOW_STEADY.name] = 0.0 if window_rising(metrics) else 1.0
    return metrics


def traffic_metrics(traffic: TrafficResult) -> dict[str, float]:
    """What the generator measured, under the names every trial stores (a real hosts'
    trial too)."""
    metrics: dict[str, float] = {metric.GOODPUT.name: traffic.goodput_bps}
    metrics |= goodput_thirds(traffic.intervals_bps) | goodput_trend(traffic.fine_bps)
    if traffic.warmup is not None:
        metrics[metric.WARMUP_S.name] = round(traffic.warmup.seconds, 3)
        metrics[metric.WARMUP_STEADY.name] = 1.0 if traffic.warmup.steady else 0.0
    if traffic.upload_bps is not None:
        metrics[metric.UPLOAD.name] = traffic.upload_bps
    if traffic.download_bps is not None:
        metrics[metric.DOWNLOAD.name] = traffic.download_bps
    if traffic.retransmits is not None:
        metrics[metric.RETRANSMITS.name] = traffic.retransmits
    if traffic.lost_packets is not None:
        metrics[metric.UDP_LOST_PACKETS.name] = traffic.lost_packets
    if traffic.lost_pct is not None:
        metrics[metric.UDP_LOST_PCT.name] = traffic.lost_pct
    if traffic.jitter_ms is not None:
        metrics[metric.UDP_JITTER.name] = traffic.jitter_ms
    metrics[metric.GENERATOR_PROCESSES.name] = traffic.processes
    if traffic.window_s is not None:
        metrics[metric.GOODPUT_WINDOW.name] = round(traffic.window_s, 4)
    return metrics


def probe_metrics(probes: ProbeResult) -> dict[str, float]:
    """What this machine's probes measured over the window."""
    metrics: dict[str, float] = {}
    for core in probes.cores:
        for part in metric.CPU_PARTS:
            metrics[metric.cpu(core.core, part)] = round(getattr(core, part), 2)
    for label, percent in probes.processes.items():
        metrics[metric.process(label)] = percent
    metrics[metric.SAMPLER_CPU.name] = probes.sampler_cpu_pct
    metrics[metric.SAMPLER_SAMPLES.name] = probes.samples
    metrics[metric.SAMPLER_WINDOW.name] = probes.window_s
    if probes.open_lag_ms is not None and probes.close_lag_ms is not None:
        metrics[metric.SAMPLER_OPEN_LAG.name] = probes.open_lag_ms
        metrics[metric.SAMPLER_CLOSE_LAG.name] = probes.close_lag_ms
    metrics |= probes.tcp_metrics  # tcp.window.*: the endpoints' counters over the window
    if probes.cpu_load is not None:
        metrics[metric.LOAD_LAB.name] = probes.cpu_load.lab_pct
        metrics[metric.LOAD_OUTSIDE.name] = probes.cpu_load.outside_pct
    if probes.load_scan_ms is not None:
        metrics[metric.LOAD_SCAN.name] = probes.load_scan_ms
    for name, count in (probes.scheduling or {}).items():
        metrics[metric.scheduling(name)] = count
    for number, (mean, lowest) in probes.clocks.items():
        metrics[metric.cpu(number, "mhz")] = mean
        metrics[metric.cpu(number, "mhz_min")] = lowest
    for number, (median, slowest) in probes.speeds.items():
        metrics[metric.cpu(number, "speed")] = median
        metrics[metric.cpu(number, "speed_min")] = slowest
    if probes.speed_cost_ms is not None:
        metrics[metric.SPEED_COST.name] = probes.speed_cost_ms
    return metrics
