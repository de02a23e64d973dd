"""A run on real hosts: a plan's traffic matrix measured between the hosts file's
machines, stored like any run, so every report, ``compare`` and the diagnosis read it.

What a plan may vary here is what tunnelbench can set on someone else's machines
without changing them: the traffic (streams, direction, duration, warm-up, protocol,
congestion control), the repetitions and the tunnel (none, or the hosts file's). The lab
settings (rates, MTUs, queue disciplines, offloads, cores) are the hosts' own and
refused by name. Every trial that fails is stored with its cause and the run goes on
while the hosts are reachable; a lost host stops the run, with the finished trials kept.
"""

import dataclasses
import logging
import os
import platform
import time
from typing import Any

from tunnelbench import __version__
from tunnelbench.bench import skips
from tunnelbench.bench.progress import Progress
from tunnelbench.bench.runner import guarded
from tunnelbench.bench.sink import store_trial
from tunnelbench.bench.store import Store
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Generator as GeneratorKind
from tunnelbench.kinds import Protection, Topology, TunnelKind
from tunnelbench.lab.state import process_start_time
from tunnelbench.model import metrics as metric
from tunnelbench.model import remotefacts
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, LabSettings, Trial, expand
from tunnelbench.model.records import Resolved, TrialStatus
from tunnelbench.model.remotefacts import CryptoDriver, RemoteFacts, SnmpView
from tunnelbench.remote import capabilities, wan
from tunnelbench.remote import trial as remote_trial
from tunnelbench.remote.hostsfile import HostsFile
from tunnelbench.remote.session import Session, missing
from tunnelbench.remote.ssh import Unreachable
from tunnelbench.remote.tunnel import (
    BUILDERS,
    RemoteTunnel,
    build_kind,
    existing,
    teardown,
)
from tunnelbench.traffic import REGISTRY as GENERATORS

log = logging.getLogger("tunnelbench.remote.run")


def check(experiment: Experiment, hosts: HostsFile) -> list[Trial]:
    """The trials of ``experiment``, checked to be measurable on ``hosts``; anything
    else is a :class:`UserError` naming the key, before any host is contacted."""
    asked = {config.tunnel.kind.value for config in experiment.configs}
    if "none" in asked and not hosts.plain_path:
        raise UserError(
            "tunnel.kind: 'none' needs a path around the tunnel, but the hosts file's"
            " tunnel.address is the server's address; give the server's plain address in"
            " server.address, or measure only the tunnel"
        )
    trials = expand(experiment)
    if not hosts.plain_path:
        # No baseline where the only path crosses the user's tunnel: it would be the tunnel.
        kept = [t for t in trials if t.config.tunnel.kind.value != "none"]
        trials = [dataclasses.replace(t, seq=i) for i, t in enumerate(kept, 1)]
    # The layout is the hosts file's: the trials record it as their topology.
    topology = Topology(hosts.layout)
    trials = [
        dataclasses.replace(t, config=dataclasses.replace(
            t.config, lab=dataclasses.replace(t.config.lab, topology=topology)))
        for t in trials
    ]  # fmt: skip
    default = dataclasses.asdict(dataclasses.replace(LabSettings(), topology=topology))
    for trial in trials:
        config = trial.config
        # lab.wan's shaper, queue and impairments go on the hosts' WAN link (remote.wan).
        bare = dataclasses.replace(config.lab, wan=wan.unset(config.lab.wan))
        if (key := _first_difference(dataclasses.asdict(bare), default)) is not None:
            raise UserError(wan.refusal(f"lab.{key}"))
        traffic = config.traffic
        if traffic.family not in hosts.families:
            raise UserError(
                "traffic.family: 6 needs the server's IPv6 address in the hosts file"
                " (server.address6)"
            )
        existing = hosts.tunnel.mode == "existing" and config.tunnel.kind.value != "none"
        if traffic.family == 6 and existing and hosts.tunnel.address6 is None:
            raise UserError(
                "traffic.family: 6 through the existing tunnel needs the server's IPv6"
                " address through it in the hosts file (tunnel.address6)"
            )
        if (refusal := skips.family_refusal(config)) is not None:
            raise UserError(refusal)
        kind = config.tunnel.kind.value
        if kind != "none" and kind != hosts.tunnel.kind:
            have = (
                f"{hosts.tunnel.kind} ({hosts.tunnel.mode})"
                if hosts.tunnel.mode != "none"
                else "none"
            )
            raise UserError(
                f"tunnel.kind: {kind!r}: the hosts file's tunnel is {have}; a remote run compares"
                " no tunnel with that one"
            )
        if config.tunnel.cpu_budget is not None:
            raise UserError("tunnel.cpu_budget: cannot be set for real hosts")
        protection = config.tunnel.protection
        if kind != "none" and protection.value not in ("none", hosts.tunnel.protection):
            raise UserError(
                f"tunnel.protection: {protection.value!r}: the hosts file's tunnel has"
                f" protection {hosts.tunnel.protection!r} (set it there: tunnel.protection)"
            )
    # A tunnel's trials record the protection the hosts file builds it with.
    wrapped = Protection(hosts.tunnel.protection)
    return [
        t if t.config.tunnel.kind.value == "none" else dataclasses.replace(
            t, config=dataclasses.replace(
                t.config, tunnel=dataclasses.replace(t.config.tunnel, protection=wrapped)))
        for t in trials
    ]  # fmt: skip


def _first_difference(given: dict[str, Any], default: dict[str, Any]) -> str | None:
    """The dotted path of the first setting that is not its default, or None."""
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(default.get(key), dict):
            if (inner := _first_difference(value, default[key])) is not None:
                return f"{key}.{inner}"
        elif value != default.get(key):
            return key
    return None


def environment(session: Session) -> dict[str, Any]:
    """The run's environment: the DUT's (it is the machine measured; a black box's as its
    SNMP agent describes it, or unknown), every host's facts, and the machine that
    controlled the run. Stored as :class:`~tunnelbench.model.environment.Environment`
    declares it (the JSON the store keeps)."""
    client = session.facts["client"]
    found: Environment
    if (dut := session.facts.get(session.file.dut)) is not None:
        found = Environment().with_keys(
            kernel=dut.kernel,
            machine=dut.machine,
            cores=dut.cores,
            cpu_governor=dut.governors.get(0),
        )
    else:
        box = session.black_boxes[session.file.dut]
        device = box.device
        found = Environment().with_keys(
            dut="a black box (no ssh)",
            system=device.description if device else "unknown (no SNMP agent given)",
            cores=device.cores if device else None,
        )
    if (record := capabilities.dut_record(session)) is not None:
        found = found.with_keys(capabilities=record)
    return found.with_keys(
        tunnelbench=__version__,
        versions={"iperf3": client.iperf3 or "?"},
        remote={
            "hosts": session.file.to_dict(),
            "facts": {role: f.to_dict() for role, f in session.facts.items()},
            "controller": {"kernel": platform.release(), "pid": os.getpid()},
        },
    ).to_dict()


def preflight(session: Session, trials: list[Trial]) -> list[Trial]:
    """What the hosts lack for this hosts file and the generators of ``trials``: one
    message naming each, exit code 2. The trials are returned as they will run: where
    they set ``lab.wan``, with the real path's MTUs as their ``lab.wan.mtu`` and
    ``lab.lan_mtu`` (the ceiling is the real link's)."""
    generators = {t.config.traffic.generator for t in trials}
    problems = missing(session.file, session.facts, generators)
    shaped = any(wan.is_set(t.config.lab.wan) for t in trials)
    if shaped and not problems:
        problems = wan.problems(session)
    if problems:
        raise UserError("; ".join(problems))
    if not shaped:
        return trials
    wan_mtu, lan_mtu = wan.mtus(session)
    return [
        dataclasses.replace(t, config=dataclasses.replace(t.config, lab=dataclasses.replace(
            t.config.lab, lan_mtu=lan_mtu,
            wan=dataclasses.replace(t.config.lab.wan, mtu=wan_mtu))))
        for t in trials
    ]  # fmt: skip


def execute(
    session: Session,
    experiment: Experiment,
    trials: list[Trial],
    store: Store,
    *,
    command_line: str,
    lock: dict[str, Any] | None,
    progress: Progress,
) -> int:
    """Record the run and measure every trial on the connected hosts; the run's id. A
    host lost mid-run stops it (the finished trials are kept) with a :class:`LabError`."""
    env = environment(session)
    if lock is not None:
        env["measurement_lock"] = lock
    owner = {"pid": os.getpid(), "start_time": process_start_time(os.getpid()) or 0}
    run_id = store.start_run(command_line, experiment.to_dict(), env, owner)
    progress.run_started(run_id, len(trials), trials, growing=False)

    def body() -> None:
        _trials(session, trials, store, run_id, progress)

    guarded(store, run_id, body, lambda status: progress.run_finished(run_id, status))
    return run_id


def _trials(
    session: Session, trials: list[Trial], store: Store, run_id: int, progress: Progress
) -> None:
    standing: list[RemoteTunnel] = []  # the built tunnel up now, if any
    link = wan.WanLink(session)
    for trial in trials:
        kind = trial.config.tunnel.kind.value
        progress.trial_started(trial)
        started = time.time()
        traffic = trial.config.traffic
        generator = GENERATORS.get(traffic.generator)
        # "auto" as the client's generator resolves it (iperf3 before 3.16: a process per
        # stream, as in the lab).
        client = session.facts["client"]
        version = client.iperf3 if traffic.generator is GeneratorKind.IPERF3 else client.iperf2
        resolved = Resolved(generator=generator.facts())
        metrics: dict[str, float] = {}
        artifacts: dict[str, Any] = {}
        try:
            tunnel = _tunnel(session, kind, trial, standing)
            resolved.tunnel_implementation = tunnel.implementation if kind != "none" else "none"
            if kind != "none":
                resolved.tunnel_version = tunnel.version()
            if kind != "none":
                resolved.tunnel_mtu = tunnel.mtu
                resolved.record_setup(tunnel.found)
                resolved.tunnel, resolved.tunnel_cipher = tunnel.kind_facts, tunnel.cipher
            resolved.remote = _remote_facts(session, tunnel if kind != "none" else None)
            if version is None:  # never this machine's instead (the run's check needs it)
                raise LabError(f"client: no {traffic.generator.value} version in its facts")
            resolved.stream_mode = generator.resolve_mode(traffic, version)
            link.set(trial.config.lab.wan)
            outcome = remote_trial.measure(
                session, tunnel, trial.config, resolved.stream_mode, trial.seq,
                wan_devices=link.devices,
            )  # fmt: skip
            metrics, artifacts = outcome.metrics, outcome.artifacts
            resolved.remote.port, resolved.remote.target = outcome.ports[0], outcome.target
            resolved.processes = int(metrics[metric.GENERATOR_PROCESSES.name])
            resolved.remote.dut_qdiscs = outcome.dut_qdiscs
            status, error = TrialStatus.OK, None
        except Unreachable as exc:
            store_trial(
                store, run_id, trial, resolved=resolved, status=TrialStatus.FAILED,
                error=str(exc), started_at=started, metrics={}, artifacts={},
            )  # fmt: skip
            progress.trial_finished(trial, TrialStatus.FAILED, str(exc), None)
            raise LabError(f"lost a host mid-run: {exc}; the finished trials are kept") from None
        except LabError as exc:
            status, error = TrialStatus.FAILED, str(exc)
            log.warning("trial %d failed: %s", trial.seq, error)
        store_trial(
            store, run_id, trial, resolved=resolved, status=status, error=error,
            started_at=started, metrics=metrics, artifacts=artifacts,
        )  # fmt: skip
        progress.trial_finished(trial, status, error or "", metrics.get(metric.GOODPUT.name))


def _remote_facts(session: Session, tunnel: RemoteTunnel | None) -> RemoteFacts:
    """The trial's record of the hosts: the tunnel's ends and devices (``tunnel`` None:
    a trial without one), and what the diagnosis reads of the DUT and how it was seen
    (``dut_view``): logged into, its crypto drivers, trip points and top clocks; a black
    box, what its SNMP agent serves."""
    role = session.file.dut
    facts = RemoteFacts(
        dut=role,
        tunnel_mode=tunnel.mode if tunnel else "none",
        tunnel_built_by=tunnel.built_by if tunnel else None,
        tunnel_ends=dict(tunnel.ends) if tunnel else {},
        tunnel_devices=dict(tunnel.devices) if tunnel else {},
        hosts={r: h.destination for r, h in session.file.hosts.items()},
        kernels={r: f.kernel for r, f in session.facts.items()},
    )
    if (found := session.facts.get(role)) is not None:
        facts.dut_view = remotefacts.SSH
        facts.crypto_drivers = {
            n: CryptoDriver(d, p) for n, (d, p) in found.cipher_drivers().items()
        }
        facts.thermal_zones, facts.trips_c = dict(found.zones), dict(found.trips_c)
        facts.max_mhz = dict(found.max_mhz)
        return facts
    box = session.black_boxes[role]
    if box.device is None:
        facts.dut_view = remotefacts.NONE
        return facts
    facts.dut_view = remotefacts.SNMP
    facts.dut_snmp = SnmpView(
        description=box.device.description,
        interfaces=tuple(sorted(box.device.interfaces.values())),
        cpu_counters=box.device.cpu_counters,
        cores=box.device.cores,
        cache_s=session.file.hosts[role].snmp_cache,
    )
    return facts


def _tunnel(
    session: Session, kind: str, trial: Trial, standing: list[RemoteTunnel]
) -> RemoteTunnel:
    """The tunnel ``trial`` crosses, built or kept; a built one is removed before a
    trial without it (its route would carry that trial's traffic too)."""
    plan = session.file.tunnel
    implementation = trial.config.tunnel.implementation
    choice = plan.implementation if implementation in ("auto", None) else implementation
    if standing and (kind == "none" or standing[0].asked != choice):
        old = standing.pop()
        teardown(session, old)
    if kind == "none":
        return RemoteTunnel("none", "none", "none")
    if plan.mode == "existing":
        return existing(session)
    if not standing:
        built = TunnelKind(kind)
        if (builder := BUILDERS.get(built)) is not None:
            tunnel = builder(session, choice)
        else:
            tunnel = build_kind(session, built, choice)
        tunnel.asked = choice
        standing.append(tunnel)
    return standing[0]
