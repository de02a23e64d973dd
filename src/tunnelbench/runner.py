"""Executes an experiment: one fresh lab per trial, traffic, probes, and the store.

This is the only place that turns a plan into system changes. Everything a trial needs
(root, programs, implementations) is checked before the first lab is built, so bad input
creates nothing. A trial that fails is stored as failed with its cause and the run goes
on; Ctrl-C stores nothing partial, tears the lab down and marks the run interrupted.
"""

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tunnelbench import environment, programs
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import StreamMode, TunnelKind
from tunnelbench.lab import netns
from tunnelbench.lab.state import is_alive
from tunnelbench.plan import Experiment, Trial, TrialConfig, expand
from tunnelbench.probes import counters
from tunnelbench.probes.sampler import ProbeResult, Sampler
from tunnelbench.store import Store
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.traffic import TrafficResult
from tunnelbench.tunnels import REGISTRY as TUNNELS

log = logging.getLogger("tunnelbench.runner")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise UserError(f"{what} needs root (it creates network namespaces); run it as root")


@dataclass(frozen=True)
class Resolution:
    """What a configuration's "auto" settings became on this machine."""

    implementation: str
    version: str
    tunnel_mtu: int
    stream_mode: StreamMode


@dataclass
class TrialOutcome:
    trial: Trial
    status: str
    error: str | None
    metrics: dict[str, float] = field(default_factory=dict)


Progress = Callable[[int, int, Trial, "TrialOutcome | None"], None]


def resolve(experiment: Experiment) -> dict[str, Resolution]:
    """Check every configuration can run here, and resolve its "auto" settings.

    Raises :class:`UserError` before anything is built if a program or an implementation
    is missing.
    """
    resolved: dict[str, Resolution] = {}
    for trial in expand(experiment):
        config = trial.config
        key = config.key()
        if key in resolved:
            continue
        tunnel = TUNNELS.get(config.tunnel.kind)
        generator = GENERATORS.get(config.traffic.generator)
        implementation = tunnel.resolve_implementation(config.tunnel.implementation)
        for program, purpose in tunnel.programs(implementation) + generator.programs():
            programs.require(program, purpose)
        mtu = config.tunnel.mtu or tunnel.default_mtu(config.lab.wan.mtu)
        resolved[key] = Resolution(
            implementation=implementation,
            version=tunnel.version(implementation),
            tunnel_mtu=mtu,
            stream_mode=generator.resolve_mode(config.traffic),
        )
    return resolved


def preflight() -> None:
    """Privileges and the programs every lab needs."""
    require_root("tunnelbench run")
    for program in ("ip", "tc", "sysctl"):
        programs.require(program, "building the lab")


def execute(
    experiment: Experiment,
    resolutions: dict[str, Resolution],
    store: Store,
    *,
    command_line: str,
    progress: Progress | None = None,
) -> int:
    """Run every trial of the experiment (checked by :func:`resolve`); return the run id."""
    trials = expand(experiment)
    versions = {}
    for trial in trials:
        resolution = resolutions[trial.config.key()]
        versions[f"{trial.config.tunnel.kind.value}/{resolution.implementation}"] = (
            resolution.version
        )
    for kind in {t.config.traffic.generator for t in trials}:
        versions[kind.value] = GENERATORS.get(kind).version()
    run_id = store.start_run(
        command_line,
        {
            "repetitions": experiment.repetitions,
            "configs": [c.to_dict() for c in experiment.configs],
        },
        environment.collect(versions),
    )
    try:
        for index, trial in enumerate(trials, start=1):
            if progress:
                progress(index, len(trials), trial, None)
            outcome = run_trial(store, run_id, trial, resolutions[trial.config.key()])
            if progress:
                progress(index, len(trials), trial, outcome)
    except KeyboardInterrupt:
        store.finish_run(run_id, "interrupted")
        raise
    except BaseException:
        store.finish_run(run_id, "failed")
        raise
    store.finish_run(run_id, "complete")
    return run_id


def run_trial(store: Store, run_id: int, trial: Trial, resolution: Resolution) -> TrialOutcome:
    """Build a lab, measure one trial in it, tear it down, and store what happened."""
    config = trial.config
    started = time.time()
    resolved: dict[str, Any] = {
        "tunnel_implementation": resolution.implementation,
        "tunnel_version": resolution.version,
        "tunnel_mtu": resolution.tunnel_mtu if config.tunnel.kind is not TunnelKind.NONE else None,
        "stream_mode": resolution.stream_mode.value,
    }
    metrics: dict[str, float] = {}
    artifacts: dict[str, Any] = {}
    try:
        traffic, probes, tunnel_counters = _measure(config, resolution, resolved)
        metrics = trial_metrics(traffic, probes, tunnel_counters)
        artifacts = {"iperf3": traffic.raw, "intervals": traffic.intervals_bps}
        if probes is not None:
            artifacts["probes"] = probes.to_dict()
        status, error = "ok", None
    except LabError as exc:
        status, error = "failed", str(exc)
        log.warning("trial %d failed: %s", trial.seq, error)
    store.add_trial(
        run_id,
        seq=trial.seq,
        repetition=trial.repetition,
        config_key=config.key(),
        config=config.to_dict(),
        resolved=resolved,
        status=status,
        error=error,
        started_at=started,
        metrics=metrics,
        artifacts=artifacts,
    )
    return TrialOutcome(trial, status, error, metrics)


Counters = dict[str, dict[str, int]]  # role -> counter deltas of its tunnel device


def _measure(
    config: TrialConfig, resolution: Resolution, resolved: dict[str, Any]
) -> tuple[TrafficResult, ProbeResult | None, Counters]:
    tunnel = TUNNELS.get(config.tunnel.kind)
    generator = GENERATORS.get(config.traffic.generator)
    lab = netns.build(config.lab, tunnel=config.tunnel.kind is not TunnelKind.NONE)
    resolved["lab_id"] = lab.lab_id
    sampler = Sampler()
    try:
        handle = tunnel.setup(lab, resolution.implementation, resolution.tunnel_mtu)
        sampler.add({f"{handle.implementation}@{r}": d.pid for r, d in handle.daemons.items()})
        sampler.start()
        warmup, duration = config.traffic.warmup, config.traffic.duration

        def on_started(processes: dict[str, int], t0: float) -> None:
            sampler.watch(processes, t0 + warmup, t0 + warmup + duration)

        before = {r: counters.read(lab.ns(r), d) for r, d in handle.devices.items()}
        traffic = generator.run(lab, config.traffic, resolution.stream_mode, on_started)
        probes = sampler.result()
        tunnel_counters = {
            role: counters.delta(before[role], counters.read(lab.ns(role), device))
            for role, device in handle.devices.items()
        }
        for role, daemon in handle.daemons.items():
            if not is_alive(daemon):
                raise LabError(
                    f"tunnel daemon {handle.implementation} on {role} (pid {daemon.pid})"
                    " died during the trial"
                )
        resolved["processes"] = traffic.processes
        return traffic, probes, tunnel_counters
    finally:
        try:
            sampler.stop()
        finally:
            lab.teardown()


def trial_metrics(
    traffic: TrafficResult, probes: ProbeResult | None, tunnel_counters: Counters
) -> dict[str, float]:
    """The numbers stored for one trial; names are stable, reports read them by name."""
    metrics: dict[str, float] = {"goodput_bps": traffic.goodput_bps}
    for role, deltas in tunnel_counters.items():
        for name, value in deltas.items():
            metrics[f"tunnel.{role}.{name}"] = value
    if traffic.upload_bps is not None:
        metrics["upload_bps"] = traffic.upload_bps
    if traffic.download_bps is not None:
        metrics["download_bps"] = traffic.download_bps
    if traffic.retransmits is not None:
        metrics["retransmits"] = traffic.retransmits
    metrics["generator_processes"] = traffic.processes
    if probes is None:
        return metrics
    for core in probes.cores:
        for part in ("user", "system", "softirq", "irq", "idle"):
            metrics[f"cpu{core.core}.{part}"] = round(getattr(core, part), 2)
    for label, percent in probes.processes.items():
        metrics[f"proc.{label}"] = percent
    metrics["sampler.cpu_pct"] = probes.sampler_cpu_pct
    metrics["sampler.samples"] = probes.samples
    metrics["sampler.window_s"] = probes.window_s
    return metrics
