"""``tunnelbench plan show``: a plan's trials, what this machine skips, and the time it takes.

Needs no root and changes nothing: capabilities are probed in anonymous namespaces.
"""

import argparse
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from tunnelbench.bench import planfile, runner
from tunnelbench.bench.planfile import TRIAL_OVERHEAD_S, Plan, estimate_seconds
from tunnelbench.bench.progress import format_duration
from tunnelbench.cli.parsing import Verbs
from tunnelbench.kinds import Order
from tunnelbench.model.plan import expand, flatten, varying_paths


def render(plan: Plan) -> str:
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
    trials = expand(experiment)
    configs = list(dict.fromkeys(t.config for t in trials))
    requested = set(experiment.configs)
    baselines = sum(1 for c in configs if c not in requested)
    shape = " x ".join(f"{a.name} ({len(a.values)})" for a in plan.axes) or "no axes"
    excluded = f", {plan.excluded} excluded" if plan.excluded else ""
    lines.append(f"matrix: {shape}{excluded}")
    _, skipped = runner.check(trials)
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
        f"estimated duration: {span(estimate_seconds(runnable), format_duration, ' to ')}"
        f" ({count(len(runnable))} trials, each its warm-up and duration"
        f" + ~{TRIAL_OVERHEAD_S:g} s to build and tear down its lab)"
    )
    lines.append("")
    paths = [p for p in varying_paths(configs) if p != "tunnel.kind"]
    header = ["seq", "run", "tunnel", *paths, "here"]
    rows = []
    flats = {c: flatten(c.to_dict()) for c in configs}
    for trial in trials:
        flat = flats[trial.config]
        status = "skip" if keys[trial.config] in skipped else "run"
        cells = [str(trial.seq), str(trial.repetition), trial.config.tunnel.kind.value]
        rows.append([*cells, *(_cell(flat[p]) for p in paths), status])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if skipped:
        counts = Counter(skipped[keys[t.config]] for t in trials if keys[t.config] in skipped)
        lines.append("")
        lines.append(f"skipped on this machine: {sum(counts.values())} trial(s)")
        lines += [f"  {reason} ({count} trials)" for reason, count in counts.items()]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "-"
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
    show.set_defaults(func=show_plan)


def show_plan(args: argparse.Namespace) -> int:
    print(render(planfile.load(Path(args.plan), quick=args.quick)))
    return 0
