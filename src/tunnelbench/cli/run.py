"""``tunnelbench run``: a plan file or the experiment options, measured and stored, then
the terminal report and the HTML and Markdown reports beside the database."""

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from tunnelbench.bench import learned, planfile, progress, runner
from tunnelbench.bench.store import Store
from tunnelbench.bench.testbed import Testbed
from tunnelbench.bench.testbeds import hosts_plan
from tunnelbench.bench.testbeds.hosts import HostsTestbed
from tunnelbench.cli.measuring import add_measuring_arguments, describe, finished, holding
from tunnelbench.cli.options import (
    DEFAULT_TUNNELS,
    DEFAULTS,
    add_budget_argument,
    add_lab_arguments,
    add_traffic_choices,
    build_experiment,
    comma_list,
    given,
    kinds_epilog,
    warmup_seconds,
    whole_number,
)
from tunnelbench.cli.parsing import Verbs
from tunnelbench.echo import capped
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import TunnelMode
from tunnelbench.model.lockrecord import LockRecord
from tunnelbench.model.plan import Experiment
from tunnelbench.model.records import TrialStatus
from tunnelbench.remote import hostsfile
from tunnelbench.remote import session as remote_session
from tunnelbench.remote.session import Session
from tunnelbench.report import view
from tunnelbench.tunnels import REGISTRY as TUNNELS


def register(verbs: Verbs) -> None:
    run = verbs.add_parser(
        "run",
        help="run a benchmark (a plan file, or the options below) and print a table",
        epilog=kinds_epilog(),
    )
    run.add_argument("plan", nargs="?", help="a plan file (TOML); see docs/plans.md")
    run.add_argument("--resume", metavar="RUN", help="run the trials a stopped run lacks")
    run.add_argument(
        "--hosts",
        metavar="FILE",
        help="measure real hosts over SSH, as a hosts file names them (docs/remote.md)",
    )
    run.add_argument(
        "--quick", action="store_true", help="one repetition of 1 s trials, for a first look"
    )
    add_measuring_arguments(run)
    experiment = run.add_argument_group(
        "experiment (without a plan file)", argument_default=argparse.SUPPRESS
    )
    experiment.add_argument(
        "--tunnels",
        type=comma_list,
        choices=[k.value for k in TUNNELS.kinds()],
        metavar="KIND,...",
        help=f"tunnel kinds to compare: {', '.join(k.value for k in TUNNELS.kinds())}"
        f" (default {DEFAULT_TUNNELS})",
    )
    experiment.add_argument("--streams", type=comma_list, help="stream counts (default 1,4)")
    experiment.add_argument(
        "--runs",
        type=whole_number,
        help=f"repetitions of each configuration (default {DEFAULTS['runs']})",
    )
    experiment.add_argument(
        "--target-ci",
        metavar="PCT",
        help="adaptive repetitions: after --runs (then the minimum), repeat a configuration"
        " until its median's 95%% interval is within ±PCT%% (e.g. 2%%)",
    )
    experiment.add_argument(
        "--max-runs",
        type=whole_number,
        help="with --target-ci: the most runs of a configuration (default 10)",
    )
    experiment.add_argument(
        "--duration",
        type=whole_number,
        help=f"measured seconds per trial (default {DEFAULTS['duration']})",
    )
    experiment.add_argument(
        "--time-limit",
        metavar="SPAN",
        help="the longest the run may take by its estimate, e.g. 30d or 36h (default 7d: a"
        " longer one is refused, as likely a slip)",
    )
    experiment.add_argument(
        "--warmup",
        type=warmup_seconds,
        help="seconds excluded at the start, or 'auto': until the path is in steady state"
        " (default auto, at most 20 s)",
    )
    add_traffic_choices(experiment)
    experiment.add_argument(
        "--fresh-labs",
        action="store_true",
        help="build a lab for every trial instead of keeping each lab standing for the next"
        " trial of the same lab and tunnel",
    )
    experiment.add_argument(
        "--family", type=whole_number, help="IP version of the traffic: 4 or 6 (default 4)"
    )
    add_lab_arguments(run)
    add_budget_argument(experiment)
    run.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    if args.resume is not None:
        return _resume(args)
    if args.hosts is not None:
        return _remote(args)
    experiment, strict = _requested_experiment(args)
    runner.preflight()
    # Every check happens before the database is touched: bad input creates nothing.
    prepared = runner.prepare(experiment, strict=strict)
    with holding(args, existing=False) as (store, lock):
        run_id = runner.start(prepared, store, command_line=shlex.join(sys.argv), lock=lock)
        describe(args, store, run_id)
        return _execute(args, prepared, store, run_id)


def _remote(args: argparse.Namespace) -> int:
    """A run on the hosts file's machines; everything is checked before any host is
    contacted, and a host that cannot be reached stops the run before it is stored."""
    hosts = hostsfile.load(Path(args.hosts))
    if args.plan is None and "tunnels" not in vars(args):
        kinds = [] if hosts.tunnel.mode is TunnelMode.NONE else [hosts.tunnel.kind.value]
        args.tunnels = (["none"] if hosts.plain_path else []) + kinds
    experiment, _ = _requested_experiment(args)
    prepared = hosts_plan.plan(experiment, hosts)

    def started(store: Store, lock: LockRecord | None, session: Session) -> int:
        facts = hosts_plan.environment(session)
        return runner.start(
            prepared, store, command_line=shlex.join(sys.argv), lock=lock, facts=facts
        )

    return _on_hosts(args, hosts, prepared, started, existing=False)


def _on_hosts(
    args: argparse.Namespace,
    hosts: hostsfile.HostsFile,
    prepared: runner.Prepared,
    started: Callable[[Store, LockRecord | None, Session], int],
    *,
    existing: bool,
    execute: Callable[[Store, int, Session, runner.Prepared], int] | None = None,
) -> int:
    """Connect to the hosts, check them (before a new run's database exists: a host that
    cannot be reached, or lacks a program, creates nothing), then run the trials of the
    run ``started`` gives on them (or let ``execute`` run it: ``tune --hosts``)."""
    session = remote_session.Session(hosts)
    try:
        with session:
            ready = hosts_plan.connected(session, prepared)
            with holding(args, existing=existing) as (store, lock):
                run_id = started(store, lock, session)
                describe(args, store, run_id)
                if execute is not None:
                    code = execute(store, run_id, session, ready)
                else:
                    code = _execute(args, ready, store, run_id, HostsTestbed(session))
    except LabError as exc:
        # What the hosts keep of a run that failed is said with why it failed.
        raise LabError("; ".join([str(exc), *session.problems])) from None
    except KeyboardInterrupt:
        for problem in session.problems:
            print(f"tunnelbench: {problem}", file=sys.stderr)
        raise
    if session.problems:
        raise LabError("; ".join(session.problems))
    return code


def _requested_experiment(args: argparse.Namespace) -> tuple[Experiment, bool]:
    """The experiment of a plan file (lenient: what this machine lacks is skipped) or of
    the command-line options (strict: what it lacks is an error)."""
    if args.plan is None:
        experiment = build_experiment(args)
        return (planfile.quicken(experiment) if args.quick else experiment), True
    if options := given(args):
        raise UserError(
            f"{options[0]}: cannot be combined with a plan file; set it in {capped(args.plan, 300)}"
        )
    return planfile.load(Path(args.plan), quick=args.quick).experiment, False


def _resume(args: argparse.Namespace) -> int:
    if args.plan is not None or args.quick or given(args):
        raise UserError("--resume: takes no plan or experiment options; the run has its own")
    if args.hosts is not None:
        return _resume_hosts(args)
    runner.preflight()
    with holding(args, existing=True) as (store, _):
        run = runner.stopped(store, args.resume)
        if run.environment.remote is not None:
            raise UserError(
                f"--resume: run {run.id} measured real hosts; resume it with --hosts FILE"
            )
        run_id, experiment = runner.resumable(store, args.resume)
        prepared = runner.prepare(experiment, strict=False)
        store.reopen_run(run_id, runner.owner())
        describe(args, store, run_id)
        return _execute(args, prepared, store, run_id)


def _resume_hosts(args: argparse.Namespace) -> int:
    """The trials a stopped hosts run lacks, on the hosts file it ran with."""
    hosts = hostsfile.load(Path(args.hosts))
    with holding(args, existing=True) as (store, _):
        run = runner.stopped(store, args.resume)
        if run.tune is not None:
            raise UserError(f"--resume: run {run.id} is a tuning session, not a hosts run")
        prepared = hosts_plan.expanded(hosts_plan.resumed(run, hosts), hosts)

    def started(store: Store, lock: LockRecord | None, session: Session) -> int:
        ready = hosts_plan.connected(session, prepared)
        adaptive = ready.experiment.adaptive is not None
        runner.check_stored(store, run.id, ready.trials, adaptive=adaptive)
        store.reopen_run(run.id, runner.owner())
        return run.id

    return _on_hosts(args, hosts, prepared, started, existing=True)


def _execute(
    args: argparse.Namespace,
    prepared: runner.Prepared,
    store: Store,
    run_id: int,
    testbed: Testbed | None = None,
) -> int:
    display: progress.Progress
    if args.json:
        display = progress.JsonProgress()
    elif args.quiet:
        display = progress.Progress()
    else:
        display = progress.for_terminal(overheads=learned.from_store(store))
    runner.execute(prepared, store, run_id, progress=display, testbed=testbed)
    loaded = view.load(store, str(run_id))
    failed = any(t.status is TrialStatus.FAILED for t in loaded.trials)
    reported = finished(loaded, args.db, as_json=args.json, reports=not args.no_reports)
    return 1 if failed or not reported else 0
