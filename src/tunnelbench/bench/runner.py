"""Executes an experiment: one trial and one loop on any testbed (the namespace lab by
default, a VM guest's lab, a hosts file's machines: :mod:`tunnelbench.bench.testbed`),
traffic, probes, and the store.

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
from tunnelbench.bench import capabilities, environment, guest_trials, skips
from tunnelbench.bench.figures import (
    traffic_artifacts,
    traffic_metrics,
    warmup_fallback,
    window_verdict,
)
from tunnelbench.bench.labpool import KEEP, LabPool
from tunnelbench.bench.progress import Progress
from tunnelbench.bench.sink import TrialSink, store_trial
from tunnelbench.bench.store import Store
from tunnelbench.bench.testbed import Resolution as Resolution
from tunnelbench.bench.testbed import Setup, Testbed
from tunnelbench.bench.testbeds.lab import LabTestbed
from tunnelbench.bench.testbeds.lab import here as here
from tunnelbench.bench.testbeds.lab import in_vm as in_vm
from tunnelbench.errors import LabError, StorageError, UserError
from tunnelbench.kinds import Order
from tunnelbench.lab.state import process_start_time
from tunnelbench.model import metrics as metric
from tunnelbench.model.environment import Environment
from tunnelbench.model.lockrecord import LockRecord
from tunnelbench.model.plan import (
    Experiment,
    TrafficSettings,
    Trial,
    TrialConfig,
    VmSettings,
    expand,
)
from tunnelbench.model.records import Resolved, RunRecord, RunStatus, TrialStatus
from tunnelbench.probes import new_probe_set
from tunnelbench.probes.trial import ProbeReadings
from tunnelbench.system import interrupts, programs
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.traffic import TrafficResult
from tunnelbench.traffic.base import WindowClosed
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.base import TunnelSpec
from tunnelbench.vm import machine
from tunnelbench.vm.kernels import Kernel, locate

log = logging.getLogger("tunnelbench.bench.runner")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise UserError(f"{what} needs root (it creates network namespaces); run it as root")


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
    #: Why the run stops after this trial (a host lost), or None.
    stops_run: str | None = None


def prepare(experiment: Experiment, *, strict: bool) -> Prepared:
    """Check every configuration can run here and resolve its "auto" settings.

    With ``strict`` (a command-line request) anything missing raises
    :class:`UserError`; otherwise (a plan) the configuration is skipped with the reason.
    Raises :class:`UserError` when nothing at all could run.
    """
    experiment, trials = planned(experiment)
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


def planned(experiment: Experiment) -> tuple[Experiment, list[Trial]]:
    """The experiment with its seed fixed (a shuffled one without a seed gets one, so
    that ``--resume`` expands it again to the same order), and its trials: every
    testbed's plan starts here."""
    if experiment.order is Order.SHUFFLED and experiment.seed is None:
        experiment = replace(experiment, seed=secrets.randbelow(2**32))
    return experiment, expand(experiment)


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
    prepared: Prepared,
    store: Store,
    *,
    command_line: str,
    lock: LockRecord | None = None,
    facts: Environment | None = None,
) -> int:
    """Record a new run of a prepared experiment; return its id. ``lock``: how the run
    holds the measurement lock (:mod:`tunnelbench.bench.measurement_lock`), for its
    environment; ``facts``: the environment a testbed other than the lab describes."""
    facts = facts if facts is not None else lab_environment(prepared)
    if lock is not None:
        facts = facts.with_keys(measurement_lock=lock)
    return store.start_run(command_line, prepared.experiment, facts, owner())


def lab_environment(prepared: Prepared) -> Environment:
    """This machine's environment and the versions of what the lab's trials run."""
    versions = {}
    for trial in prepared.trials:
        resolution = prepared.resolutions.get(trial.config.key())
        # A guest resolves "auto" on its own kernel; its trials record what it chose.
        if resolution is not None and not in_vm(trial.config):
            name = f"{trial.config.tunnel.kind.value}/{resolution.implementation}"
            versions[name] = resolution.version
    for kind in {t.config.traffic.generator for t in prepared.trials}:
        versions[kind.value] = GENERATORS.get(kind).version()
    return environment.describe(versions)


def execute(
    prepared: Prepared,
    store: Store,
    run_id: int,
    *,
    progress: Progress | None = None,
    testbed: Testbed | None = None,
) -> str:
    """Run every trial of the run not stored yet, then, for an adaptive experiment, the
    rounds its configurations still need; return the run's final status. ``testbed``:
    where the trials run (default: the namespace lab)."""
    stored = {t.seq for t in store.trials(run_id)}
    pending = [t for t in prepared.trials if t.seq not in stored]
    planned = {t.seq for t in prepared.trials}
    total = len(prepared.trials) + len(stored - planned)  # + rounds already added
    adaptive = prepared.experiment.adaptive is not None
    shown = progress or Progress()
    shown.run_started(run_id, total, pending, growing=adaptive)

    def body() -> None:
        keep = 0 if prepared.experiment.fresh_labs else KEEP
        with testbed or LabTestbed(LabPool(keep=keep)) as bed:
            run_trials(prepared, store, run_id, pending, shown, bed)
            if adaptive:
                _run_extra_rounds(prepared, store, run_id, shown, bed)

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
    testbed: Testbed,
) -> None:
    """Run ``trials`` in order on ``testbed``; those on another kernel afterwards, one VM
    for each kernel and guest size (:mod:`tunnelbench.bench.guest_trials`). A fault
    that ends the run (:meth:`Testbed.stops_run`) is a :class:`LabError` after its
    trial is stored."""
    testbed.expect(
        [t for t in trials if t.config.key() not in prepared.skipped and not in_vm(t.config)]
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
        outcome = run_trial(store, run_id, trial, prepared.resolutions.get(key), testbed)
        progress.trial_finished(
            trial, outcome.status, outcome.error or "", outcome.metrics.get(metric.GOODPUT.name)
        )
        if outcome.stops_run is not None:
            raise LabError(outcome.stops_run)
    for (spec, vm), group in guests.items():
        assert isinstance(store, Store)
        kernel = prepared.kernels[spec]
        guest_trials.run(prepared.experiment, store, run_id, kernel, vm, group, progress)


def _run_extra_rounds(
    prepared: Prepared, store: Store, run_id: int, progress: Progress, testbed: Testbed
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
        store.set_precision(run_id, standing)
        next_seq = max((t.seq for t in trials), default=0) + 1
        round_ = precision.next_round(
            experiment, attempts, next_seq=next_seq, exclude=prepared.skipped
        )
        if not round_:
            break
        progress.round_added(
            round_, {t.config.key(): standing[t.config.key()] for t in round_}, target
        )
        run_trials(prepared, store, run_id, round_, progress, testbed)
    configs = {t.config_key: t.config for t in trials}
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
    experiment = run.experiment
    check_stored(store, run.id, expand(experiment), adaptive=experiment.adaptive is not None)
    return run.id, experiment


def check_stored(store: Store, run_id: int, planned: list[Trial], *, adaptive: bool) -> None:
    """Every stored trial of run ``run_id`` is the one ``planned`` puts at its place
    (those after the planned ones: an adaptive run's added rounds, of its configurations)."""
    expected = {t.seq: t.config.key() for t in planned}
    known = {t.config.key() for t in planned} if adaptive else set()
    for trial in store.trials(run_id):
        fits = expected.get(trial.seq) == trial.config_key or (
            trial.seq > len(planned) and trial.config_key in known
        )
        if not fits:
            raise UserError(
                f"--resume: run {run_id}'s stored trial {trial.seq} does not match its"
                " experiment (stored by another tunnelbench version?); start a new run"
            )


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
    resolution: Resolution | None,
    testbed: Testbed,
) -> TrialOutcome:
    """Measure one trial on ``testbed`` and store what happened; ``resolution``: how its
    configuration was resolved beforehand (None: the testbed resolves it per trial)."""
    config = trial.config
    started = time.time()
    resolved = Resolved(generator=GENERATORS.get(config.traffic.generator).facts())
    if testbed.where is not None:
        resolved.record_where(testbed.where)
    metrics: dict[str, float] = {}
    artifacts: dict[str, Any] = {}
    stops: str | None = None
    try:
        metrics, artifacts = _measure(config, resolution, resolved, testbed)
        status, error = TrialStatus.OK, None
    except LabError as exc:
        status, error = TrialStatus.FAILED, str(exc)
        stops = testbed.stops_run(exc)
        log.warning("trial %d failed: %s", trial.seq, error)
    store_trial(
        store, run_id, trial, resolved=resolved, status=status, error=error,
        started_at=started, metrics=metrics, artifacts=artifacts,
    )  # fmt: skip
    return TrialOutcome(trial, status, error, metrics, stops)


def _measure(
    config: TrialConfig, resolution: Resolution | None, resolved: Resolved, testbed: Testbed
) -> tuple[dict[str, float], dict[str, Any]]:
    """One trial on ``testbed``: its metrics and artifacts, checked against the
    testbed's own counters; what the set-up tells goes into ``resolved``."""
    setup = testbed.acquire(config, resolution, resolved)
    measured = False
    try:
        with setup:
            ran = _traffic(config, resolved, setup)
            traffic, readings = ran.traffic, ran.readings
            metrics = traffic_metrics(traffic) | readings.metrics | ran.window
            metrics |= window_verdict(metrics) | warmup_fallback(config.traffic, traffic)
            setup.check(metrics, config.traffic.duration)
            resolved.traffic.processes = traffic.processes
            # What the senders reported (iperf3), else what they were given (iperf2
            # reports none).
            requested = ran.settings.congestion
            resolved.traffic.congestion = traffic.congestion or requested
            if None not in (traffic.congestion, requested) and traffic.congestion != requested:
                named = "traffic.congestion" if config.traffic.congestion else "the lab's default"
                raise LabError(
                    f"{named}: {requested!r} was set, but the senders used {traffic.congestion!r}"
                )
            artifacts = traffic_artifacts(config.traffic, traffic) | ran.raw
            artifacts["probe_readings"] = readings.raw()
            measured = True
            return metrics, artifacts
    finally:
        testbed.release(setup, measured=measured)


@dataclass(frozen=True)
class _Ran:
    """A trial's traffic as it ran, with the probes and the testbed's window around it."""

    settings: TrafficSettings  # as the testbed ran it
    traffic: TrafficResult
    readings: ProbeReadings
    window: dict[str, float]  # the window's figures
    raw: dict[str, Any]  # and their raw record


def _traffic(config: TrialConfig, resolved: Resolved, setup: Setup) -> _Ran:
    """The generator's traffic with the probes and the testbed's window around it."""
    generator = GENERATORS.get(config.traffic.generator)
    assert resolved.traffic.stream_mode is not None  # the testbed's acquire resolved it
    probe_set = new_probe_set()
    readings: ProbeReadings | None = None
    duration = config.traffic.duration

    def on_started(processes: dict[str, int], begin: float) -> WindowClosed:
        closed = setup.window_opened(processes, begin, begin + duration)
        probe_set.started(begin)
        return closed

    try:
        setup.open_window()
        probe_set.before(setup.machines, setup.context)
        settings = setup.traffic(config.traffic)
        traffic = generator.run(
            setup.ends, settings, resolved.traffic.stream_mode, on_started, setup.broken,
            setup.signals(probe_set),
        )  # fmt: skip
        window, raw = setup.close_window()
        if (reason := setup.broken()) is not None:
            raise LabError(reason)
        readings = probe_set.after()
    finally:
        setup.stop_window()
        if readings is None:
            probe_set.abandon()  # a trial that failed first leaves no ping running
    setup.record(resolved, probe_set)
    return _Ran(settings, traffic, readings, window, raw)
