"""A plan for real hosts: what a plan may vary on a hosts file's machines, checked before
any host is contacted, and its trials as they run there.

What a plan may vary here is what tunnelbench can set on someone else's machines
without changing them: the traffic (streams, direction, duration, warm-up, protocol,
congestion control), the repetitions, their order and seed, adaptive rounds, the tunnel
(none, or the hosts file's; where tunnelbench builds it, any kind it builds on hosts,
between the same ends; a built one's MTU) and ``lab.wan``'s shaper, queue and
impairments on the real WAN link. The other lab settings (rates, MTUs, offloads, cores,
kernels) are the hosts' own and refused by name, as are a CPU budget and fresh labs.
The plan is expanded as the lab's (:func:`tunnelbench.bench.runner.planned`), from an
experiment whose configurations say what the hosts are (their layout, the tunnel's
protection, the real path's MTUs), so that ``--resume`` and adaptive rounds find the
same trials.
"""

import dataclasses
import os
import platform

from tunnelbench import __version__
from tunnelbench.bench import skips
from tunnelbench.bench.runner import Prepared, planned
from tunnelbench.bench.testbeds import hosts_estimate
from tunnelbench.errors import UserError
from tunnelbench.kinds import Protection, Topology, TunnelKind, TunnelMode
from tunnelbench.model.environment import Environment
from tunnelbench.model.hostsrecord import Controller, RemoteRecord
from tunnelbench.model.plan import (
    Experiment,
    LabSettings,
    Settings,
    TrialConfig,
    expand,
    flatten,
    with_baselines,
)
from tunnelbench.model.records import RunRecord
from tunnelbench.remote import capabilities, wan
from tunnelbench.remote.hostsfile import BUILDABLE, PROTECTABLE, HostsFile
from tunnelbench.remote.session import Session, missing

#: Why a baseline is not measured where the only path to the server is the user's tunnel.
NO_PLAIN_PATH = "no path around the hosts file's tunnel: a baseline would cross it"


def plan(experiment: Experiment, hosts: HostsFile) -> Prepared:
    """The trials of ``experiment`` as they run on ``hosts``; anything the hosts cannot
    take is a :class:`UserError` naming the key, before any host is contacted."""
    asked = {config.tunnel.kind for config in experiment.configs}
    if TunnelKind.NONE in asked and not hosts.plain_path:
        raise UserError(
            "tunnel.kind: 'none' needs a path around the tunnel, but the hosts file's"
            " tunnel.address is the server's address; give the server's plain address in"
            " server.address, or measure only the tunnel"
        )
    if experiment.fresh_labs:
        raise UserError("fresh_labs: cannot be set for real hosts (they are no lab)")
    # The layout is the hosts file's: the trials record it as their topology.
    topology = Topology(hosts.layout)
    configs = [
        dataclasses.replace(c, lab=dataclasses.replace(c.lab, topology=topology))
        for c in experiment.configs
    ]
    default = _lab_settings(dataclasses.replace(LabSettings(), topology=topology))
    for config in with_baselines(configs):
        if config.tunnel.kind is TunnelKind.NONE and not hosts.plain_path:
            continue  # no baseline where the only path crosses the user's tunnel
        _check(config, hosts, default)
    # A tunnel's trials record the protection the hosts file builds it with.
    wrapped = hosts.tunnel.protection
    configs = [
        c if c.tunnel.kind is TunnelKind.NONE else dataclasses.replace(
            c, tunnel=dataclasses.replace(c.tunnel, protection=wrapped))
        for c in configs
    ]  # fmt: skip
    experiment, _ = planned(dataclasses.replace(experiment, configs=tuple(configs)))
    return expanded(experiment, hosts)


def expanded(experiment: Experiment, hosts: HostsFile) -> Prepared:
    """The trials of an experiment already fitted to ``hosts`` (a stored one, resumed):
    a baseline that would cross the user's tunnel is left out, the others renumbered."""
    trials = expand(experiment)
    skipped: dict[str, str] = {}
    if not hosts.plain_path:
        none = [t for t in trials if t.config.tunnel.kind is TunnelKind.NONE]
        skipped = {t.config.key(): NO_PLAIN_PATH for t in none}
        kept = [t for t in trials if t.config.tunnel.kind is not TunnelKind.NONE]
        trials = [dataclasses.replace(t, seq=i) for i, t in enumerate(kept, 1)]
    # ``skipped`` keeps the baselines out of adaptive rounds; no trial of them is stored.
    return Prepared(experiment, trials, {}, skipped)


def refusal(config: TrialConfig, hosts: HostsFile) -> str | None:
    """Why ``config`` (as a plan gives it, the hosts' layout as its topology) cannot run
    on ``hosts``, or None (``tune --hosts`` asks this of each candidate)."""
    default = _lab_settings(dataclasses.replace(LabSettings(), topology=Topology(hosts.layout)))
    try:
        _check(config, hosts, default)
    except UserError as exc:
        return str(exc)
    return None


def _lab_settings(lab: LabSettings) -> Settings:
    """The lab's settings by their path below ``lab.`` (``wan.rate``)."""
    return flatten(dataclasses.asdict(lab))


def _check(config: TrialConfig, hosts: HostsFile, default: Settings) -> None:
    """One configuration checked against the hosts file (:func:`plan`)."""
    # lab.wan's shaper, queue and impairments go on the hosts' WAN link (remote.wan).
    bare = dataclasses.replace(config.lab, wan=wan.unset(config.lab.wan))
    if (key := _first_difference(_lab_settings(bare), default)) is not None:
        raise UserError(wan.refusal(f"lab.{key}"))
    traffic = config.traffic
    if traffic.family not in hosts.families:
        raise UserError(
            "traffic.family: 6 needs the server's IPv6 address in the hosts file (server.address6)"
        )
    kind = config.tunnel.kind
    through = hosts.tunnel.mode is TunnelMode.EXISTING and kind is not TunnelKind.NONE
    if traffic.family == 6 and through and hosts.tunnel.address6 is None:
        raise UserError(
            "traffic.family: 6 through the existing tunnel needs the server's IPv6"
            " address through it in the hosts file (tunnel.address6)"
        )
    if (refusal := skips.family_refusal(config)) is not None:
        raise UserError(refusal)
    if kind is not TunnelKind.NONE and kind is not hosts.tunnel.kind:
        _check_other_kind(kind, hosts)
    if config.tunnel.cpu_budget is not None:
        raise UserError("tunnel.cpu_budget: cannot be set for real hosts")
    if config.tunnel.mtu is not None and hosts.tunnel.mode is TunnelMode.EXISTING:
        raise UserError(
            "tunnel.mtu: the hosts file's tunnel is the user's, already up, with its own MTU;"
            ' tunnelbench sets the MTU only of a tunnel it builds (tunnel.mode = "build")'
        )
    protection = config.tunnel.protection
    if kind is not TunnelKind.NONE and protection not in (Protection.NONE, hosts.tunnel.protection):
        raise UserError(
            f"tunnel.protection: {protection.value!r}: the hosts file's tunnel has"
            f" protection {hosts.tunnel.protection.value!r} (set it there: tunnel.protection)"
        )


def _check_other_kind(kind: TunnelKind, hosts: HostsFile) -> None:
    """A kind other than the hosts file's: built between its tunnel's ends as its own
    is (with its protection), where tunnelbench builds the tunnel; else refused."""
    plan = hosts.tunnel
    if plan.mode is not TunnelMode.BUILD:
        have = f"{plan.kind} ({plan.mode})" if plan.mode is not TunnelMode.NONE else "none"
        raise UserError(
            f"tunnel.kind: {kind.value!r}: the hosts file's tunnel is {have}; a remote run"
            ' compares no tunnel with that one (with tunnel.mode = "build" tunnelbench'
            " builds the plan's kinds between its ends)"
        )
    if kind not in {TunnelKind(k) for k in BUILDABLE}:
        raise UserError(
            f"tunnel.kind: {kind.value!r}: tunnelbench builds {', '.join(BUILDABLE)} on real hosts"
        )
    wraps = {TunnelKind(k) for k in PROTECTABLE}
    if plan.protection is not Protection.NONE and kind not in wraps:
        raise UserError(
            f"tunnel.kind: {kind.value!r}: the hosts file's tunnel.protection"
            f" {plan.protection.value!r} wraps {', '.join(PROTECTABLE)} only"
        )


def _first_difference(given: Settings, default: Settings) -> str | None:
    """The path of the first setting that is not its default, or None."""
    return next((path for path, value in given.items() if value != default.get(path)), None)


def connected(session: Session, prepared: Prepared) -> Prepared:
    """What the hosts lack for this hosts file and the generators of the trials: one
    message naming each, exit code 2. The trials are returned as they will run: where
    they set ``lab.wan``, with the real path's MTUs as their ``lab.wan.mtu`` and
    ``lab.lan_mtu`` (the ceiling is the real link's)."""
    experiment = prepared.experiment
    generators = {t.config.traffic.generator for t in prepared.trials}
    kinds = [t.config.tunnel.kind for t in prepared.trials]
    built = [k for k in dict.fromkeys(kinds) if k is not TunnelKind.NONE]
    problems = missing(session.file, session.facts, generators, built)
    shaped = any(wan.is_set(c.lab.wan) for c in experiment.configs)
    if shaped and not problems:
        problems = wan.problems(session)
    if problems:
        raise UserError("; ".join(problems))
    if not shaped:
        return prepared
    wan_mtu, lan_mtu = wan.mtus(session)
    configs = tuple(
        c if not wan.is_set(c.lab.wan) else dataclasses.replace(c, lab=dataclasses.replace(
            c.lab, lan_mtu=lan_mtu, wan=dataclasses.replace(c.lab.wan, mtu=wan_mtu)))
        for c in experiment.configs
    )  # fmt: skip
    return expanded(dataclasses.replace(experiment, configs=configs), session.file)


def resumed(run: RunRecord, hosts: HostsFile) -> Experiment:
    """The experiment of a stopped hosts run, checked to be resumed with the hosts file
    it ran with (the same machines, layout and tunnel)."""
    remote = run.environment.remote
    if remote is None:
        raise UserError(f"--hosts: run {run.id} ran in the lab; resume it without --hosts")
    if not hosts_estimate.ran_on(run, hosts):
        raise UserError(
            f"--hosts: {hosts.path} is not the hosts file run {run.id} ran with"
            f" ({remote.hosts.path}, as it was then); resume it with that one"
        )
    return run.experiment


def environment(session: Session) -> Environment:
    """The run's environment: the DUT's (it is the machine measured; a black box's as its
    SNMP agent describes it, or unknown), every host's facts, and the machine that
    controlled the run."""
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
        remote=RemoteRecord(
            session.file.record(),
            {role: f.record() for role, f in session.facts.items()},
            Controller(platform.release(), os.getpid()),
        ),
    )
