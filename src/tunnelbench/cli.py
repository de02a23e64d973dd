"""The ``tunnelbench`` command: parse arguments, call the layers below, print."""

import argparse
import logging
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from tunnelbench import __version__
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Direction, StreamMode
from tunnelbench.options import (
    DEFAULT_TUNNELS,
    add_lab_arguments,
    build_experiment,
    comma_list,
    whole_number,
)
from tunnelbench.plan import Trial
from tunnelbench.runner import TrialOutcome
from tunnelbench.store import DEFAULT_DB
from tunnelbench.units import mbit


def cmd_run(args: argparse.Namespace) -> int:
    from tunnelbench import runner
    from tunnelbench.analysis.summary import summarize_run
    from tunnelbench.report import table
    from tunnelbench.store import Store

    experiment = build_experiment(args)
    runner.preflight()
    resolutions = runner.resolve(experiment)  # every check before the database is touched
    store = Store(Path(args.db))
    progress = None if args.quiet else _print_progress
    try:
        run_id = runner.execute(
            experiment,
            resolutions,
            store,
            command_line=shlex.join(sys.argv),
            progress=progress,
        )
        trials = store.trials(run_id)
        print()
        print(table.render(summarize_run(trials)))
        failed = [t for t in trials if t.status != "ok"]
        for trial in failed:
            print(f"trial {trial.seq} failed: {trial.error}")
        print(
            f"\nstored as run {run_id} in {args.db}; `tunnelbench report {run_id} --db {args.db}`"
        )
        return 1 if failed else 0
    finally:
        store.close()


def _print_progress(index: int, total: int, trial: Trial, outcome: TrialOutcome | None) -> None:
    c = trial.config
    what = (
        f"{c.tunnel.kind.value}, {c.traffic.streams} stream(s), {c.traffic.direction.value},"
        f" run {trial.repetition}"
    )
    if outcome is None:
        print(f"[{index}/{total}] {what} ...", end="", flush=True)
    elif outcome.status == "ok":
        print(f" {mbit(outcome.metrics['goodput_bps']):,.0f} Mbit/s", flush=True)
    else:
        print(f" FAILED: {outcome.error}", flush=True)


def cmd_report(args: argparse.Namespace) -> int:
    from tunnelbench.analysis.summary import summarize_run
    from tunnelbench.report import json_report, table
    from tunnelbench.store import Store

    store = Store.open_existing(Path(args.db))
    try:
        if args.format == "json":
            print(json_report.render(store, args.run))
        else:
            run = store.run(args.run)
            print(f"run {run.id} ({run.status}): {run.command_line}")
            print(table.render(summarize_run(store.trials(run.id))))
    finally:
        store.close()
    return 0


def cmd_lab(args: argparse.Namespace) -> int:
    from tunnelbench import labcmd

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "up": labcmd.up,
        "status": labcmd.status,
        "exec": labcmd.exec_,
        "down": labcmd.down,
        "clean": labcmd.clean,
    }
    return handlers[args.lab_verb](args)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="tunnelbench",
        description="Benchmark tunnels and VPNs in a network-namespace lab.",
    )
    top.add_argument("--version", action="version", version=f"tunnelbench {__version__}")
    top.add_argument("-v", "--verbose", action="store_true", help="log every command run")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    run = verbs.add_parser("run", help="run a benchmark and print a table")
    run.add_argument(
        "--tunnels",
        type=comma_list,
        default=comma_list(DEFAULT_TUNNELS),
        help=f"tunnel kinds to compare (default {DEFAULT_TUNNELS})",
    )
    run.add_argument(
        "--streams", type=comma_list, default=["1", "4"], help="stream counts (default 1,4)"
    )
    run.add_argument(
        "--runs", type=whole_number, default=3, help="repetitions of each configuration (default 3)"
    )
    run.add_argument(
        "--duration", type=whole_number, default=5, help="measured seconds per trial (default 5)"
    )
    run.add_argument(
        "--warmup", type=whole_number, default=1, help="seconds excluded at the start (default 1)"
    )
    run.add_argument(
        "--direction", default=Direction.UPLOAD.value, help="upload | download | bidir"
    )
    run.add_argument(
        "--stream-mode", default=StreamMode.AUTO.value, help="auto | single | processes"
    )
    run.add_argument(
        "--family", type=whole_number, default=4, help="IP version of the traffic: 4 or 6"
    )
    add_lab_arguments(run)
    run.add_argument(
        "--db", default=str(DEFAULT_DB), help="results database (default ./tunnelbench.db)"
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    run.set_defaults(func=cmd_run)

    report = verbs.add_parser("report", help="print a stored run")
    report.add_argument("run", nargs="?", default="latest", help="run id or 'latest'")
    report.add_argument("--format", choices=["table", "json"], default="table")
    report.add_argument("--db", default=str(DEFAULT_DB))
    report.set_defaults(func=cmd_report)

    lab = verbs.add_parser("lab", help="build, inspect and remove labs by hand")
    lab_verbs = lab.add_subparsers(dest="lab_verb", required=True, metavar="LAB_VERB")
    up = lab_verbs.add_parser("up", help="build a lab and leave it running")
    up.add_argument("--tunnel", default="none", help="none | wireguard | vxlan")
    up.add_argument("--name", help="lab id: 1-6 lowercase letters or digits (default random)")
    add_lab_arguments(up)
    lab_verbs.add_parser("status", help="list labs and what they hold")
    ex = lab_verbs.add_parser("exec", help="run a command in a lab namespace")
    ex.add_argument("--lab", help="lab id (default: the only lab)")
    ex.add_argument("role", help="client | gw | gwa | gwb | server")
    ex.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    down = lab_verbs.add_parser("down", help="remove one lab")
    down.add_argument("lab_id")
    lab_verbs.add_parser("clean", help="remove every lab tunnelbench recorded")
    lab.set_defaults(func=cmd_lab)
    return top


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(name)s: %(message)s",
    )
    # SIGTERM gets the same orderly teardown as Ctrl-C.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        code: int = args.func(args)
        return code
    except UserError as exc:
        print(f"tunnelbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except LabError as exc:
        print(f"tunnelbench: lab error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\ntunnelbench: interrupted; the lab was torn down", file=sys.stderr)
        return 130
