"""``tunnelbench tune``: from one configuration (a plan without a matrix, or the options),
find the settings that improve it by experiment, keep only significant gains, and print
the path taken and the final configuration as a plan."""

import argparse
import re
import shlex
import sys
from functools import partial
from pathlib import Path

from tunnelbench.bench import planfile, runner
from tunnelbench.bench import tune as tuning
from tunnelbench.bench.store import Store
from tunnelbench.bench.testbeds import hosts_plan
from tunnelbench.bench.tune_benches import Bench, HostsBench
from tunnelbench.bench.tune_progress import TuneJson, TuneLines, TuneProgress
from tunnelbench.cli import run as run_cli
from tunnelbench.cli.measuring import add_measuring_arguments, describe, finished, holding
from tunnelbench.cli.options import (
    DEFAULTS,
    add_budget_argument,
    add_lab_arguments,
    add_traffic_choices,
    build_experiment,
    given,
    kinds_epilog,
    parse_percent,
    warmup_seconds,
    whole_number,
)
from tunnelbench.cli.parsing import Verbs
from tunnelbench.echo import capped, shown, unknown_value
from tunnelbench.errors import UserError
from tunnelbench.kinds import TunnelMode
from tunnelbench.model.fields import SETTINGS
from tunnelbench.model.lockrecord import LockRecord
from tunnelbench.model.plan import REPETITIONS_MAX, TrialConfig, check_int
from tunnelbench.model.records import RunStatus
from tunnelbench.model.tuning import Target, TuneRecord
from tunnelbench.remote import hostsfile
from tunnelbench.remote.session import Session
from tunnelbench.report import view
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.units import refuse_other_digits

_UNITS = {"s": 1, "m": 60, "h": 3600}
BUDGET_MAX_S = 7 * 24 * 3600.0
MAX_STEPS_LIMIT = 100


def register(verbs: Verbs) -> None:
    tune = verbs.add_parser(
        "tune",
        help="find the settings that improve one configuration, by experiment",
        description="Measure one configuration, turn its advice into candidate changes,"
        " measure each against it (interleaved, repeated until a rank test decides), keep"
        " the largest significant gain and go on until nothing more helps.",
        epilog=kinds_epilog(),
    )
    tune.add_argument("plan", nargs="?", help="a plan file with one configuration (no matrix)")
    tune.add_argument("--resume", metavar="RUN", help="go on with a stopped tuning session")
    tune.add_argument(
        "--hosts",
        metavar="FILE",
        help="tune on real hosts over SSH, as a hosts file names them: only the changes"
        " run --hosts can make there are tried (docs/remote.md)",
    )
    tune.add_argument(
        "--budget",
        default="15m",
        help="wall time for the session's trials, e.g. 900s, 15m, 1h (default 15m)",
    )
    tune.add_argument(
        "--target",
        default=Target.THROUGHPUT.value,
        choices=[t.value for t in Target],
        help="what to improve (default throughput); latency is the"
        " loaded round trip's 95th percentile",
    )
    tune.add_argument(
        "--min-gain",
        metavar="PCT",
        default="2%",
        help="the smallest gain worth keeping (default 2%%): a significant but smaller"
        " one is reported as too small",
    )
    tune.add_argument(
        "--max-runs",
        dest="runs_a_side",
        metavar="N",
        type=whole_number,
        default=tuning.DEFAULT_MAX_RUNS,
        help=f"the most runs a side in one comparison (default {tuning.DEFAULT_MAX_RUNS})",
    )
    tune.add_argument(
        "--max-steps",
        metavar="N",
        type=whole_number,
        default=tuning.DEFAULT_MAX_STEPS,
        help=f"the most changes to try in turn (default {tuning.DEFAULT_MAX_STEPS})",
    )
    add_measuring_arguments(tune)
    start = tune.add_argument_group(
        "start configuration (without a plan file)", argument_default=argparse.SUPPRESS
    )
    start.add_argument(
        "--tunnel",
        choices=[k.value for k in TUNNELS.kinds()],
        metavar="KIND",
        help=f"tunnel kind: {', '.join(k.value for k in TUNNELS.kinds())} (default wireguard)",
    )
    start.add_argument("--streams", help="stream count (default 1)")
    start.add_argument(
        "--duration", type=whole_number, help=f"measured seconds per trial ({DEFAULTS['duration']})"
    )
    start.add_argument(
        "--warmup",
        type=warmup_seconds,
        help=f"seconds excluded at the start, or 'auto' ({DEFAULTS['warmup']})",
    )
    add_traffic_choices(start)
    start.add_argument("--family", type=whole_number, help="IP version: 4 or 6 (default 4)")
    add_lab_arguments(tune, kernel=False)
    add_budget_argument(start)
    tune.set_defaults(func=handle)


def parse_budget(text: str) -> float:
    refuse_other_digits("--budget", text, "15m")
    match = re.fullmatch(r"\s*([0-9]{1,9}(?:\.[0-9]{1,3})?)\s*([smh]?)\s*", text)
    if match is None:
        raise UserError(f"--budget: {shown(text)} is not a duration such as 900s, 15m or 1h")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if not 1 <= seconds <= BUDGET_MAX_S:
        raise UserError(f"--budget: {shown(text)} is out of range; allowed 1 s to 7 days")
    return seconds


def _target(text: str) -> Target:
    try:
        return Target(text)
    except ValueError:
        raise UserError(f"--target: {unknown_value(text, [t.value for t in Target])}") from None


def _start(args: argparse.Namespace) -> TrialConfig:
    """The start configuration: the plan's only one, or the options'."""
    if args.plan is not None:
        if options := given(args) or _given_start(args):
            raise UserError(
                f"{options[0]}: cannot be combined with a plan file; set it in"
                f" {capped(args.plan, 300)}"
            )
        plan = planfile.load(Path(args.plan))
        if len(plan.experiment.configs) != 1:
            raise UserError(
                f"{capped(args.plan, 300)}: tune starts from one configuration; this plan has"
                f" {len(plan.experiment.configs)} (remove its [matrix])"
            )
        return plan.experiment.configs[0]
    kind = SETTINGS["tunnel.kind"].parse("--tunnel", getattr(args, "tunnel", "wireguard"))
    args.tunnels = [kind.value]
    args.streams = [getattr(args, "streams", "1")]
    (config,) = build_experiment(args).configs
    return config


def _given_start(args: argparse.Namespace) -> list[str]:
    return [f"--{name}" for name in ("tunnel", "streams") if hasattr(args, name)]


def _request(args: argparse.Namespace) -> tuning.Request:
    return tuning.Request(
        start=_start(args),
        target=_target(args.target),
        budget_s=parse_budget(args.budget),
        max_runs=check_int("--max-runs", args.runs_a_side, 4, REPETITIONS_MAX),
        min_gain_pct=parse_percent("--min-gain", args.min_gain),
        max_steps=check_int("--max-steps", args.max_steps, 1, MAX_STEPS_LIMIT),
    )


def handle(args: argparse.Namespace) -> int:
    if args.resume is not None:
        return _resume(args)
    if args.hosts is not None:
        return _on_hosts(args)
    request = _request(args)
    runner.preflight("tune")
    prepared = tuning.prepare(request)  # before the database is touched
    with holding(args, existing=False) as (store, lock):
        command_line = shlex.join(sys.argv)
        run_id, record = tuning.begin(
            request, prepared, store, command_line=command_line, lock=lock
        )
        describe(args, store, run_id)
        return _execute(args, store, run_id, record)


def _on_hosts(args: argparse.Namespace) -> int:
    """A tuning session on the hosts file's machines, with ``run --hosts``'s checks (all
    before any host is contacted, the hosts' before the database exists) and its
    connection kept over the session."""
    hosts = hostsfile.load(Path(args.hosts))
    if args.plan is None and "tunnel" not in vars(args):
        # As run --hosts: the hosts file's tunnel unless told (the lab's default,
        # wireguard, is refused where the hosts have another).
        own = hosts.tunnel.mode is not TunnelMode.NONE
        args.tunnel = hosts.tunnel.kind.value if own else "none"
    request = _request(args)
    prepared = tuning.prepare_hosts(request, hosts)

    def started(store: Store, lock: LockRecord | None, session: Session) -> int:
        ready = tuning.start_trials(hosts_plan.connected(session, prepared))
        facts = hosts_plan.environment(session)
        run_id, _ = tuning.begin(
            request, ready, store, command_line=shlex.join(sys.argv), lock=lock, facts=facts
        )
        return run_id

    return run_cli._on_hosts(
        args, hosts, prepared, started, existing=False, execute=partial(_on_bench, args)
    )


def _resume(args: argparse.Namespace) -> int:
    if args.plan is not None or given(args) or _given_start(args):
        raise UserError("--resume: takes no plan or start options; the session has its own")
    if args.hosts is not None:
        return _resume_hosts(args)
    runner.preflight("tune")
    with holding(args, existing=True) as (store, _):
        run_id, record = tuning.resumable(store, args.resume)
        store.reopen_run(run_id, runner.owner())
        describe(args, store, run_id)
        return _execute(args, store, run_id, record)


def _resume_hosts(args: argparse.Namespace) -> int:
    """A stopped hosts tuning session, on the hosts file it ran with: checked before any
    host is contacted, then the hosts as a new session checks them, and on from its
    path's last step as in the lab."""
    hosts = hostsfile.load(Path(args.hosts))
    with holding(args, existing=True) as (store, _):
        run_id, _record = tuning.resumable(store, args.resume, hosts)
        experiment = hosts_plan.resumed(store.run(str(run_id)), hosts)
    prepared = tuning.start_trials(hosts_plan.expanded(experiment, hosts))

    def started(store: Store, lock: LockRecord | None, session: Session) -> int:
        store.reopen_run(run_id, runner.owner())
        return run_id

    return run_cli._on_hosts(
        args, hosts, prepared, started, existing=True, execute=partial(_on_bench, args)
    )


def _on_bench(
    args: argparse.Namespace, store: Store, run_id: int, session: Session, _: runner.Prepared
) -> int:
    """The session ``run_id`` on the connected hosts, from its path as stored."""
    record = store.run(str(run_id)).tune
    assert record is not None  # begin recorded it
    return _execute(args, store, run_id, record, HostsBench(session, record.start))


def _execute(
    args: argparse.Namespace,
    store: Store,
    run_id: int,
    record: TuneRecord,
    bench: Bench | None = None,
) -> int:
    display: TuneProgress
    if args.json:
        display = TuneJson()
    elif args.quiet:
        display = TuneProgress()
    else:
        display = TuneLines()
    status = tuning.Session(store, run_id, record, display, bench).execute()
    # A failed candidate's trials are a verdict on it, not a failure of the session.
    reported = finished(
        view.load(store, str(run_id)), args.db, as_json=args.json, reports=not args.no_reports
    )
    return 0 if status is RunStatus.COMPLETE and reported else 1
