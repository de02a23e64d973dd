"""``tunnelbench plan show``: a plan's trials, what this machine skips, and the time it takes.

Needs no root and changes nothing: capabilities are probed in anonymous namespaces, and a
``lab.kernel`` is checked as ``run`` checks it before it downloads anything
(:func:`tunnelbench.vm.kernels.check`); what only the download would tell is said.
"""

import argparse
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from tunnelbench.bench import learned, planfile, runner
from tunnelbench.bench.planfile import (
    BUSY_VM,
    REFERENCE,
    Overheads,
    Plan,
    estimate_seconds,
    guests,
)
from tunnelbench.bench.progress import format_duration
from tunnelbench.bench.testbeds import hosts_estimate, hosts_plan
from tunnelbench.bench.testbeds.hosts_estimate import HostsOverheads
from tunnelbench.cli.parsing import Verbs, add_db_argument
from tunnelbench.errors import UserError
from tunnelbench.kinds import Order, TunnelMode
from tunnelbench.model.plan import (
    Experiment,
    Settings,
    Trial,
    TrialConfig,
    expand,
    flatten,
    varying_paths,
)
from tunnelbench.model.wan import format_pct, format_us
from tunnelbench.remote import hostsfile
from tunnelbench.remote.hostsfile import HostsFile
from tunnelbench.report import fit
from tunnelbench.units import format_rate
from tunnelbench.vm import kernels

#: Settings that are rates in bit/s, shown as a plan writes them (``100mbit``).
RATE_PATHS = ("lab.wan.rate", "traffic.udp_rate")


#: The VM figures of :class:`Overheads`: any of them learned here ends the busy-day range.
_VM_FIELDS = {"vm_boot_s", "vm_built_s", "vm_kept_s"}
#: What ``plan show --hosts`` cannot know before the run logs in.
HOSTS_UNCHECKED = (
    "what the hosts have (programs, tunnel kinds, the WAN link's queues) is checked when the"
    " run logs in; `tunnelbench hosts check FILE` checks it now"
)


@dataclass(frozen=True)
class OnHosts:
    """The hosts file a plan is shown for (``plan show --hosts``), with the overheads
    its estimate counts."""

    file: HostsFile
    overheads: HostsOverheads = hosts_estimate.REFERENCE


def _trials(
    experiment: Experiment, hosts: OnHosts | None
) -> tuple[Experiment, list[Trial], dict[str, str], list[str]]:
    """The experiment as it runs (on ``hosts``: fitted to them as ``run --hosts`` fits
    it, a setting they cannot take refused by name), its trials, why some are skipped
    (by config key) and what could not be checked here."""
    if hosts is None:
        trials = expand(experiment)
        return (experiment, trials, *checked(trials))
    prepared = hosts_plan.plan(experiment, hosts.file)
    experiment = prepared.experiment
    return experiment, expand(experiment), dict(prepared.skipped), [HOSTS_UNCHECKED]


def _estimate(
    runnable: list[Trial], experiment: Experiment, overheads: Overheads, hosts: OnHosts | None
) -> float:
    if hosts is None:
        return estimate_seconds(runnable, fresh_labs=experiment.fresh_labs, overheads=overheads)
    return hosts_estimate.estimate_seconds(runnable, hosts.file, hosts.overheads)


def to_json(
    plan: Plan, overheads: Overheads = REFERENCE, hosts: OnHosts | None = None
) -> dict[str, Any]:
    """What :func:`render` shows, as plain values (the shape is documented in the README's
    Conventions): every trial with its flattened settings and, when this machine (or
    ``hosts``) skips it, why."""
    experiment = plan.experiment
    if experiment.order is Order.SHUFFLED and experiment.seed is None:
        experiment = replace(experiment, seed=0)  # as render shows it
    experiment, trials, skipped, unchecked = _trials(experiment, hosts)
    configs = list(dict.fromkeys(t.config for t in trials))
    keys = {c: c.key() for c in configs}
    flats = {c: flatten(c.to_dict()) for c in configs}
    runnable = [t for t in trials if keys[t.config] not in skipped]
    adaptive = experiment.adaptive
    most = adaptive.max_repetitions if adaptive else experiment.repetitions
    seconds = _estimate(runnable, experiment, overheads, hosts)
    reasons = Counter(skipped[keys[t.config]] for t in trials if keys[t.config] in skipped)
    busy = None
    if hosts is None and guests(runnable) and not _VM_FIELDS & dict(overheads.learned).keys():
        busy = estimate_seconds(runnable, fresh_labs=experiment.fresh_labs, overheads=BUSY_VM)
    return {
        "name": plan.name,
        "source": str(plan.source),
        "description": plan.description.strip() if plan.description else None,
        "order": experiment.order.value,
        "seed": plan.experiment.seed,
        "axes": [{"name": axis.name, "size": len(axis.values)} for axis in plan.axes],
        "excluded": plan.excluded,
        "configurations": len(configs),
        "baselines": sum(1 for c in configs if c not in set(experiment.configs)),
        "repetitions": experiment.repetitions,
        "adaptive": None
        if adaptive is None
        else {"target_pct": adaptive.target_pct, "max_repetitions": adaptive.max_repetitions},
        "vm_boots": guests(runnable),
        "estimated_seconds": {
            "min": round(seconds, 1),
            "max": round(seconds * most / experiment.repetitions, 1),
            # With other work on the machine: the busy day's VM figures where this
            # machine has not taught its own (None without a guest or once learned).
            "busy_max": round(busy * most / experiment.repetitions, 1) if busy else None,
        },
        "hosts": None if hosts is None else str(hosts.file.path),
        "overheads": _overheads_json(overheads if hosts is None else hosts.overheads),
        "trials": [
            {
                "seq": trial.seq,
                "repetition": trial.repetition,
                "settings": flats[trial.config],
                "skipped": skipped.get(keys[trial.config]),
                "vm": trial.config.lab.in_vm,
            }
            for trial in trials
        ],
        "skipped": [{"reason": reason, "trials": count} for reason, count in reasons.items()],
        "unchecked": unchecked,
    }


def checked(trials: list[Trial]) -> tuple[dict[str, str], list[str]]:
    """Why each configuration that cannot run here is skipped (by config key), as `run`
    finds it: what the machine lacks (:func:`runner.check`), and a ``lab.kernel`` that
    cannot be found, which skips every configuration on it (as
    :func:`runner.prepare` does). Also what could not be checked without downloading
    (a kernel package not yet fetched), each said once."""
    _, skipped = runner.check(trials)
    configs = list(dict.fromkeys(t.config for t in trials))
    refused: dict[str, str] = {}
    unchecked: list[str] = []
    for config in configs:
        spec = config.lab.kernel
        if not runner.in_vm(config) or spec in refused or config.key() in skipped:
            continue
        try:
            if (note := kernels.check(spec)) is not None and note not in unchecked:
                unchecked.append(note)
            refused[spec] = ""
        except UserError as exc:
            refused[spec] = str(exc)
    for config in configs:
        if reason := refused.get(config.lab.kernel):
            skipped[config.key()] = reason
    return skipped, unchecked


def _overheads_json(overheads: Overheads | HostsOverheads) -> dict[str, Any]:
    """The figures the estimate counted, and which of them this machine's (or the hosts')
    trials gave."""
    counts = dict(overheads.learned)
    fields: tuple[str, ...] = ("built_s", "kept_s", "vm_built_s", "vm_kept_s", "vm_boot_s")
    if isinstance(overheads, HostsOverheads):
        fields = ("built_s", "kept_s", "session_s")
    return {
        field: {"seconds": getattr(overheads, field), "learned_from": counts.get(field)}
        for field in fields
    }


def _hosts_text(hosts: HostsFile) -> str:
    """``hosts.toml (road-warrior, DUT gw, tunnel vxlan built by tunnelbench)``."""
    plan = hosts.tunnel
    tunnel = {
        TunnelMode.NONE: "no tunnel",
        TunnelMode.BUILD: f"tunnel {plan.kind.value} built by tunnelbench",
        TunnelMode.EXISTING: f"the user's {plan.kind.value} tunnel",
    }[plan.mode]
    return f"{hosts.path} ({hosts.layout}, DUT {hosts.dut}, {tunnel})"


def _each_trial(overheads: Overheads, hosts: OnHosts | None) -> str:
    """What each trial is counted at besides its traffic, and where the figures come from."""
    if hosts is not None:
        return _hosts_overheads_text(hosts.overheads)
    return (
        f"~{overheads.built_s:g} s where its lab is built or ~{overheads.kept_s:g} s"
        f" where a kept lab serves it ({_source(overheads, 'built_s', 'kept_s')})"
    )


def _hosts_overheads_text(overheads: HostsOverheads) -> str:
    """What a hosts trial and session are counted at, and where the figures come from."""
    counts = dict(overheads.learned)
    if not counts:
        source = "the reference figures, measured on the test rig's sshd hosts"
    else:
        what = f"medians of {sum(counts.values())} trials stored here on these hosts"
        source = what if len(counts) == 2 else f"partly {what}, partly the reference figures"
    return (
        f"~{overheads.built_s:g} s where tunnelbench builds its tunnel on the hosts or"
        f" ~{overheads.kept_s:g} s otherwise ({source}), and ~{overheads.session_s:g} s to"
        " log in, check and clean up the hosts (the reference figure)"
    )


def _source(overheads: Overheads, *fields: str) -> str:
    """Where the figures of ``fields`` came from, for the estimate's lines."""
    counts = dict(overheads.learned)
    found = [counts[f] for f in fields if f in counts]
    if not found:
        return "the reference machine's figures"
    what = f"{sum(found)} {'trials and boots' if 'vm_boot_s' in fields else 'trials'}"
    if len(found) < len(fields):
        return f"partly medians of {what} stored here, partly the reference machine's"
    return f"medians of {what} stored here"


def _vm_lines(
    runnable: list[Trial],
    experiment: Experiment,
    overheads: Overheads,
    span: Callable[[float, Callable[[float], str]], str],
) -> list[str]:
    """What the trials in a VM guest add to the estimate (none without them); ``span``
    shows a duration, or its range for an adaptive plan."""
    if not (boots := guests(runnable)):
        return []
    in_vm = sum(1 for t in runnable if t.config.lab.in_vm)
    lines = [
        f"in a VM: {in_vm} trials on another kernel, {boots} boot(s); counted at"
        f" ~{overheads.vm_boot_s:g} s a boot and ~{overheads.vm_built_s:g} s a trial"
        f" besides its traffic where its lab is built, ~{overheads.vm_kept_s:g} s in a"
        f" kept one ({_source(overheads, 'vm_boot_s', 'vm_built_s', 'vm_kept_s')};"
        " the reference machine's with an emulated CPU, TCG: less under KVM)"
    ]
    if not _VM_FIELDS & dict(overheads.learned).keys():
        busy = estimate_seconds(runnable, fresh_labs=experiment.fresh_labs, overheads=BUSY_VM)
        lines.append(
            f"  with other work on the machine, up to {span(busy, format_duration)}"
            f" (~{BUSY_VM.vm_boot_s:g} s a boot, ~{BUSY_VM.vm_built_s:g} s and"
            f" ~{BUSY_VM.vm_kept_s:g} s a trial: the reference machine on a busy day;"
            " a run here teaches the estimate this machine's own)"
        )
    return lines


def _skipped_lines(
    trials: list[Trial],
    keys: dict[TrialConfig, str],
    skipped: dict[str, str],
    runnable: list[Trial],
    *,
    on_hosts: bool = False,
) -> list[str]:
    """How many trials are skipped here (or on the hosts), and why (none where nothing
    is); that nothing runs, where nothing is ``runnable``."""
    if not skipped:
        return []
    counts = Counter(skipped[keys[t.config]] for t in trials if keys[t.config] in skipped)
    # A guest's programs are this machine's and its cores its vCPUs: what it lacks
    # of those is known here (its kernel is probed when it boots).
    guest = any(keys[c] in skipped and c.lab.in_vm for c in keys)
    where = "on this machine or in its VM guests" if guest else "on this machine"
    if on_hosts:
        where = "on these hosts"
    lines = [
        "",
        f"skipped {where}: {sum(counts.values())} trial(s)",
        *(f"  {reason} ({count} trials)" for reason, count in counts.items()),
    ]
    if not runnable:
        refused = "these hosts" if on_hosts else "this machine"
        lines.append(f"nothing runs here: `run` refuses this plan on {refused}")
    return lines


def _table(
    flats: dict[TrialConfig, Settings],
    paths: list[str],
    status: dict[TrialConfig, str],
    runs: str,
) -> list[str]:
    """One row per configuration (in ``flats``' order): its number, kind, the settings
    that vary (``paths``), its runs and what happens to it here."""
    header = ["#", "tunnel", *paths, "runs", "here"]
    rows = []
    for number, (config, flat) in enumerate(flats.items(), start=1):
        cells = [str(number), config.tunnel.kind.value, *(_cell(flat[p], p) for p in paths)]
        rows.append([*cells, runs, status[config]])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def render(
    plan: Plan,
    overheads: Overheads = REFERENCE,
    width: int | None = None,
    hosts: OnHosts | None = None,
) -> str:
    """What the plan runs (on ``hosts``: as ``run --hosts`` runs it there); with
    ``width``, the prose wrapped to it (the table of configurations is left whole: its
    rows are read across)."""
    experiment = plan.experiment
    lines = [f"plan {plan.name} ({plan.source})"]
    if plan.description:
        lines.append(f"  {plan.description.strip()}")
    seed_note = ""
    if experiment.order is Order.SHUFFLED:
        if experiment.seed is None:
            seed_note = ", shuffled (seed chosen at run time; shown with seed 0)"
            experiment = replace(experiment, seed=0)
        else:
            seed_note = f", shuffled with seed {experiment.seed}"
    experiment, trials, skipped, unchecked = _trials(experiment, hosts)
    configs = list(dict.fromkeys(t.config for t in trials))
    requested = set(experiment.configs)
    baselines = sum(1 for c in configs if c not in requested)
    shape = " x ".join(f"{a.name} ({len(a.values)})" for a in plan.axes) or "no axes"
    excluded = f", {plan.excluded} excluded" if plan.excluded else ""
    lines.append(f"matrix: {shape}{excluded}")
    if hosts is not None:
        lines.append(f"on hosts: {_hosts_text(hosts.file)}")
    keys = {c: c.key() for c in configs}
    runnable = [t for t in trials if keys[t.config] not in skipped]
    # ``trials`` holds every configuration ``repetitions`` times; an adaptive plan runs
    # each at most ``most`` times, so its maximum is ``most / repetitions`` as much.
    adaptive = experiment.adaptive
    most = adaptive.max_repetitions if adaptive else experiment.repetitions

    def span(low: float, show: Callable[[float], str], sep: str) -> str:
        high = low * most / experiment.repetitions
        return show(low) + (f"{sep}{show(high)}" if adaptive else "")

    count = partial(span, show=lambda n: f"{n:.0f}", sep="-")
    estimate = _estimate(runnable, experiment, overheads, hosts)
    lines.append(
        f"configurations: {len(configs)} ({len(configs) - baselines} requested +"
        f" {baselines} added baselines) x {count(experiment.repetitions)} repetition(s)"
        f"{seed_note} = {count(len(trials))} trials"
    )
    if adaptive is not None:
        lines.append(
            f"repetitions: {experiment.repetitions}-{most}, until the median's 95% interval"
            f" is within ±{adaptive.target_pct:g}% (each configuration on its own, baselines"
            f" too; below, the first {experiment.repetitions} rounds)"
        )
    lines.append(
        f"estimated duration: {span(estimate, format_duration, ' to ')}"
        f" ({count(len(runnable))} trials, each its warm-up and duration"
        f" + {_each_trial(overheads, hosts)}; the reports at the end)"
    )
    lines += _vm_lines(runnable, experiment, overheads, partial(span, sep=" to "))
    # One row per configuration; the order says how its runs fall into trials.
    paths = [p for p in varying_paths(configs) if p != "tunnel.kind"]
    flats = {c: flatten(c.to_dict()) for c in configs}
    if common := shared_settings([flats[c] for c in configs], {"tunnel.kind", *paths}):
        shown = ", ".join(f"{p} {_cell(v, p)}" for p, v in common.items())
        lines.append(f"every configuration: {shown}")
    lines.append("")
    status = {c: "skip" if keys[c] in skipped else "vm" if c.lab.in_vm else "run" for c in configs}
    head, table = lines, _table(flats, paths, status, count(experiment.repetitions))
    lines = [""]
    lines.append(_order(experiment.order, len(configs)))
    lines += _skipped_lines(trials, keys, skipped, runnable, on_hosts=hosts is not None)
    if unchecked:
        lines += ["", "not checked here:", *(f"  {note}" for note in unchecked)]
    if width is not None:
        head, lines = fit.wrapped(head, width), fit.wrapped(lines, width)
    return "\n".join([*head, *table, *lines])


def _order(order: Order, configurations: int) -> str:
    """How the rows become trials (``--json`` lists every trial with its place)."""
    rounds = "in rounds: each round runs every configuration once"
    if order is Order.SHUFFLED:
        return f"order: {rounds}, in an order shuffled with the seed"
    return f"order: {rounds}, #1 to #{configurations}"


def shared_settings(flats: list[Settings], left: set[str]) -> Settings:
    """The settings every configuration has alike and not at its default (a plan's base:
    rate, queue, budget), but those in ``left`` (the table's columns): a one-row table
    would otherwise hide what the plan set."""
    default = TrialConfig().settings()
    first, rest = flats[0], flats[1:]
    return {
        path: value
        for path, value in first.items()
        if path not in left
        and value != default.get(path)
        and all(flat.get(path) == value for flat in rest)
    }


def _cell(value: object, path: str = "") -> str:
    if value is None:
        return "-"
    if path in RATE_PATHS and isinstance(value, int):
        return format_rate(value)
    if path in ("lab.wan.delay", "lab.wan.jitter") and isinstance(value, int):
        return format_us(value)
    if path in ("lab.wan.loss", "lab.wan.reorder") and isinstance(value, int | float):
        return format_pct(value)
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def register(verbs: Verbs) -> None:
    plan = verbs.add_parser("plan", help="inspect plan files")
    plan_verbs = plan.add_subparsers(dest="plan_verb", required=True, metavar="PLAN_VERB")
    show = plan_verbs.add_parser(
        "show", help="the trials a plan expands to, what is skipped here, and how long it takes"
    )
    show.add_argument("plan", help="a plan file (TOML)")
    show.add_argument("--quick", action="store_true", help="as `run --quick` would run it")
    show.add_argument("--json", action="store_true", help="as a JSON object")
    show.add_argument(
        "--hosts",
        metavar="FILE",
        help="as `run --hosts FILE` runs it on real hosts: what they cannot take is refused"
        " by name, and no host is contacted (docs/remote.md)",
    )
    add_db_argument(
        show,
        "results database whose trials on this machine (with --hosts: on those hosts) give"
        " the estimate's overheads",
    )
    show.set_defaults(func=show_plan)


def show_plan(args: argparse.Namespace) -> int:
    plan = planfile.load(Path(args.plan), quick=args.quick)
    hosts = None
    if args.hosts is not None:
        found = hostsfile.load(Path(args.hosts))
        hosts = OnHosts(found, hosts_estimate.overheads(Path(args.db), found))
        overheads = REFERENCE
    else:
        overheads = learned.overheads(Path(args.db))
    text = json.dumps(to_json(plan, overheads, hosts), indent=2) if args.json else None
    print(text if text is not None else render(plan, overheads, fit.width(), hosts))
    return 0
