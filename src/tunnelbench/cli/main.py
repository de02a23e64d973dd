"""The ``tunnelbench`` command: parse arguments, call the layers below, print."""

import argparse
import logging
import os
import re
import shlex
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

from tunnelbench import __version__
from tunnelbench.bench import measurement_lock
from tunnelbench.bench.store import DEFAULT_DB
from tunnelbench.cli.options import (
    DEFAULT_TUNNELS,
    add_lab_arguments,
    build_experiment,
    comma_list,
    given,
    whole_number,
)
from tunnelbench.echo import capped, shown
from tunnelbench.errors import LabError, SystemFault, UserError
from tunnelbench.model.records import TrialStatus
from tunnelbench.tunnels import REGISTRY as TUNNELS

if TYPE_CHECKING:
    from tunnelbench.bench.runner import Prepared
    from tunnelbench.bench.store import Store
    from tunnelbench.model.plan import Experiment


def cmd_run(args: argparse.Namespace) -> int:
    from tunnelbench.bench import runner
    from tunnelbench.bench.store import Store

    if args.resume is not None:
        return _resume(args)
    experiment, strict = _requested_experiment(args)
    runner.preflight()
    # Every check happens before the database is touched: bad input creates nothing.
    prepared = runner.prepare(experiment, strict=strict)
    lock = measurement_lock.acquire(allow_concurrent=args.allow_concurrent)
    try:
        store = Store(Path(args.db))
        try:
            run_id = runner.start(
                prepared, store, command_line=shlex.join(sys.argv), lock=lock.record()
            )
            return _execute(args, prepared, store, run_id)
        finally:
            store.close()
    finally:
        lock.release()


def _requested_experiment(args: argparse.Namespace) -> "tuple[Experiment, bool]":
    """The experiment of a plan file (lenient: what this machine lacks is skipped) or of
    the command-line options (strict: what it lacks is an error)."""
    from tunnelbench.bench import planfile

    if args.plan is None:
        experiment = build_experiment(args)
        return (planfile.quicken(experiment) if args.quick else experiment), True
    if options := given(args):
        raise UserError(
            f"{options[0]}: cannot be combined with a plan file; set it in {capped(args.plan, 300)}"
        )
    return planfile.load(Path(args.plan), quick=args.quick).experiment, False


def _resume(args: argparse.Namespace) -> int:
    from tunnelbench.bench import runner
    from tunnelbench.bench.store import Store

    if args.plan is not None or args.quick or given(args):
        raise UserError("--resume: takes no plan or experiment options; the run has its own")
    runner.preflight()
    lock = measurement_lock.acquire(allow_concurrent=args.allow_concurrent)
    try:
        store = Store.open_existing(Path(args.db))
        try:
            run_id, experiment = runner.resumable(store, args.resume)
            prepared = runner.prepare(experiment, strict=False)
            store.reopen_run(run_id, runner.owner())
            return _execute(args, prepared, store, run_id)
        finally:
            store.close()
    finally:
        lock.release()


def _execute(args: argparse.Namespace, prepared: "Prepared", store: "Store", run_id: int) -> int:
    from tunnelbench.analysis.summary import summarize_run
    from tunnelbench.bench import progress, runner
    from tunnelbench.cli import report as reportcmd
    from tunnelbench.report import findings, table
    from tunnelbench.report import precision as precision_report

    display: progress.Progress
    if args.json:
        display = progress.JsonProgress()
    elif args.quiet:
        display = progress.Progress()
    else:
        display = progress.LineProgress()
    runner.execute(prepared, store, run_id, progress=display)
    trials = store.trials(run_id)
    failed = [t for t in trials if t.status is TrialStatus.FAILED]
    if args.json:
        reported = reportcmd.write_reports(store, run_id, as_json=True)
        return 1 if failed or not reported else 0
    print()
    run = store.run(str(run_id))
    summaries = summarize_run(trials, run.environment)
    print(table.render(summaries))
    for trial in failed:
        print(f"trial {trial.seq} failed: {trial.error}")
    for line in precision_report.lines(run, trials):
        print(line)
    reasons = sorted({t.error or "" for t in trials if t.status is TrialStatus.SKIPPED})
    for reason in reasons:
        count = sum(1 for t in trials if t.status is TrialStatus.SKIPPED and t.error == reason)
        print(f"skipped {count} trial(s): {reason}")
    if verdicts := findings.terminal_lines(summaries):
        print("\ndiagnosis and advice:")
        print("\n".join(verdicts))
    print(f"\nstored as run {run_id} in {args.db}; `tunnelbench report {run_id} --db {args.db}`")
    reported = reportcmd.write_reports(store, run_id, as_json=False)
    return 1 if failed or not reported else 0


def cmd_plan_show(args: argparse.Namespace) -> int:
    from tunnelbench.bench import planfile
    from tunnelbench.cli import plan as planshow

    plan = planfile.load(Path(args.plan), quick=args.quick)
    print(planshow.render(plan))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from tunnelbench.cli import doctor

    return doctor.main(as_json=args.json)


def cmd_report(args: argparse.Namespace) -> int:
    from tunnelbench.cli import report as reportcmd

    return reportcmd.report(args)


def cmd_runs(args: argparse.Namespace) -> int:
    from tunnelbench.cli import report as reportcmd

    return reportcmd.runs(args)


def cmd_lab(args: argparse.Namespace) -> int:
    from tunnelbench.cli import lab as labcmd

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "up": labcmd.up,
        "status": labcmd.status,
        "exec": labcmd.exec_,
        "down": labcmd.down,
        "clean": labcmd.clean,
    }
    return handlers[args.lab_verb](args)


class _Parser(argparse.ArgumentParser):
    """argparse, with the values it echoes in a usage error capped (``invalid choice:
    '<a megabyte>'``). Subcommands' parsers are of the same class."""

    def error(self, message: str) -> NoReturn:
        message = re.sub(r"'([^']{60,})'", lambda m: shown(m.group(1)), message)
        super().error(re.sub(r"\S{80,}", lambda m: capped(m.group(0)), message))


def parser() -> argparse.ArgumentParser:
    top: argparse.ArgumentParser = _Parser(
        prog="tunnelbench",
        description="Benchmark tunnels and VPNs in a network-namespace lab.",
    )
    top.add_argument("--version", action="version", version=f"tunnelbench {__version__}")
    top.add_argument("-v", "--verbose", action="store_true", help="log every command run")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    run = verbs.add_parser(
        "run",
        help="run a benchmark (a plan file, or the options below) and print a table",
    )
    run.add_argument("plan", nargs="?", help="a plan file (TOML); see docs/plans.md")
    run.add_argument("--resume", metavar="RUN", help="run the trials a stopped run lacks")
    run.add_argument(
        "--quick", action="store_true", help="one repetition of 1 s trials, for a first look"
    )
    run.add_argument(
        "--db", default=str(DEFAULT_DB), help="results database (default ./tunnelbench.db)"
    )
    run.add_argument(
        "--allow-concurrent",
        action="store_true",
        help="run even while another tunnelbench measurement runs on this machine (both"
        " runs' figures are then false; recorded with the run)",
    )
    shown = run.add_mutually_exclusive_group()
    shown.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    shown.add_argument("--json", action="store_true", help="progress as JSON lines, no table")
    experiment = run.add_argument_group(
        "experiment (without a plan file)", argument_default=argparse.SUPPRESS
    )
    experiment.add_argument(
        "--tunnels",
        type=comma_list,
        help=f"tunnel kinds to compare: {', '.join(k.value for k in TUNNELS.kinds())}"
        f" (default {DEFAULT_TUNNELS})",
    )
    experiment.add_argument("--streams", type=comma_list, help="stream counts (default 1,4)")
    experiment.add_argument(
        "--runs", type=whole_number, help="repetitions of each configuration (default 3)"
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
        "--duration", type=whole_number, help="measured seconds per trial (default 5)"
    )
    experiment.add_argument(
        "--warmup", type=whole_number, help="seconds excluded at the start (default 1)"
    )
    experiment.add_argument("--direction", help="upload | download | bidir (default upload)")
    experiment.add_argument("--stream-mode", help="auto | single | processes (default auto)")
    experiment.add_argument(
        "--family", type=whole_number, help="IP version of the traffic: 4 or 6 (default 4)"
    )
    add_lab_arguments(run)
    run.set_defaults(func=cmd_run)

    plan = verbs.add_parser("plan", help="inspect plan files")
    plan_verbs = plan.add_subparsers(dest="plan_verb", required=True, metavar="PLAN_VERB")
    show = plan_verbs.add_parser(
        "show", help="the trials a plan expands to, what is skipped here, and how long it takes"
    )
    show.add_argument("plan", help="a plan file (TOML)")
    show.add_argument("--quick", action="store_true", help="as `run --quick` would run it")
    show.set_defaults(func=cmd_plan_show)

    doctor = verbs.add_parser("doctor", help="what this kernel and machine can test")
    doctor.add_argument("--json", action="store_true", help="as JSON")
    doctor.set_defaults(func=cmd_doctor)

    from tunnelbench.cli import (
        ceiling as ceilingcmd,  # the `ceiling` verb: pure arithmetic, no root
    )

    ceiling = verbs.add_parser(
        "ceiling", help="the theoretical TCP goodput ceiling of a tunnel on a link of known rate"
    )
    ceilingcmd.add_arguments(ceiling)
    ceiling.set_defaults(func=ceilingcmd.main)

    report = verbs.add_parser(
        "report", help="a stored run as a table, Markdown, HTML, JSON or CSV; or two compared"
    )
    report.add_argument("run", nargs="?", help="run id or 'latest' (default latest)")
    report.add_argument(
        "--format",
        default="table",
        help="table | md | html | json | csv (default table); JSON follows "
        "docs/report-schema.json, CSV has one row per trial",
    )
    report.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="write to PATH instead of standard output; Markdown also writes its charts "
        "as PNG files into PATH's name without its suffix + '-charts/'",
    )
    report.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="the same as `tunnelbench compare A B` (format table, md or json)",
    )
    report.add_argument("--db", default=str(DEFAULT_DB), help="results database")
    report.set_defaults(func=cmd_report)

    from tunnelbench.cli import compare as comparecmd  # the `compare` verb: parser and handler

    comparecmd.add_parser(verbs)

    runs = verbs.add_parser("runs", help="list the stored runs")
    runs.add_argument("--db", default=str(DEFAULT_DB), help="results database")
    runs.set_defaults(func=cmd_runs)

    lab = verbs.add_parser("lab", help="build, inspect and remove labs by hand")
    lab_verbs = lab.add_subparsers(dest="lab_verb", required=True, metavar="LAB_VERB")
    up = lab_verbs.add_parser("up", help="build a lab and leave it running")
    up.add_argument("--tunnel", default="none", help=" | ".join(k.value for k in TUNNELS.kinds()))
    up.add_argument("--name", help="lab id: 1-6 lowercase letters or digits (default random)")
    add_lab_arguments(up)
    lab_verbs.add_parser("status", help="list labs and what they hold")
    ex = lab_verbs.add_parser("exec", help="run a command in a lab namespace")
    ex.add_argument("--lab", help="lab id (default: the only lab)")
    ex.add_argument("role", help="client | gw | gwa | gwb | server")
    ex.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    down = lab_verbs.add_parser("down", help="remove one lab")
    down.add_argument("lab_id")
    down.add_argument(
        "--force", action="store_true", help="remove it even while a live process uses it"
    )
    clean = lab_verbs.add_parser(
        "clean", help="remove every lab tunnelbench recorded whose owner process is gone"
    )
    clean.add_argument(
        "--force", action="store_true", help="also remove labs that live runs are using"
    )
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
    stdout = sys.stdout
    sys.stdout = cast(TextIO, _NamedStdout(stdout))
    try:
        return _call(args)
    finally:
        sys.stdout = stdout


def _call(args: argparse.Namespace) -> int:
    """Run the verb; every failure becomes one line on standard error and an exit code."""
    try:
        code: int = args.func(args)
        # Write out standard output now, so that a full disk behind `> file` is reported
        # here instead of by the interpreter at exit.
        sys.stdout.flush()
        return code
    except UserError as exc:
        print(f"tunnelbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except SystemFault as exc:
        print(f"tunnelbench: error: {exc}", file=sys.stderr)
        _silence_stdout()
        return exc.exit_code
    except LabError as exc:
        print(f"tunnelbench: lab error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        torn = "; the lab was torn down" if args.verb in ("run", "lab") else ""
        print(f"\ntunnelbench: interrupted{torn}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`tunnelbench report | head`): not an error to report.
        _silence_stdout()
        return 141
    except OSError as exc:
        # A fault of the machine that no layer below turned into a message (a full disk
        # or an I/O error on standard output): say which file and why, exit 1.
        broken = _silence_stdout()
        where = capped(repr(exc.filename), 300) if exc.filename else None
        where = where or ("standard output" if broken else "")
        reason = exc.strerror or capped(str(exc), 200)
        print(f"tunnelbench: error: {where + ': ' if where else ''}{reason}", file=sys.stderr)
        return 1
    except Exception as exc:
        # The last line of defence: a bug, named in one line (the traceback with -v).
        if args.verbose:
            traceback.print_exc()
        print(
            f"tunnelbench: internal error: {type(exc).__name__}: {capped(str(exc), 200)}"
            " (a bug: please report it with the command line; -v shows the traceback)",
            file=sys.stderr,
        )
        return 1


class _NamedStdout:
    """Standard output whose write errors (a full disk, an I/O error) name it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise SystemFault(f"standard output: {exc.strerror or exc}") from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise SystemFault(f"standard output: {exc.strerror or exc}") from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _silence_stdout() -> bool:
    """Point standard output at /dev/null if it cannot be written, so that flushing it
    at exit does not fail again; whether it could not."""
    try:
        sys.stdout.flush()
    except OSError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return True
    return False
