"""The ``tunnelbench`` command: the verbs (one module each, registered in one list) and
the one place where every error a verb raises becomes a message and an exit code."""

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, TextIO, cast

from tunnelbench import __version__
from tunnelbench.bench.store import database_from_variable
from tunnelbench.cli import (
    ceiling,
    compare,
    completion,
    doctor,
    hosts,
    lab,
    plan,
    report,
    run,
    runs,
    tune,
)
from tunnelbench.cli.parsing import CappedParser, db_from_variable
from tunnelbench.echo import capped
from tunnelbench.errors import LabError, SystemFault, UserError
from tunnelbench.system import interrupts

#: Every verb, in the order ``--help`` lists them; each module registers its own parser.
VERBS = (run, tune, plan, doctor, ceiling, report, compare, runs, lab, hosts, completion)


def parser() -> argparse.ArgumentParser:
    top: argparse.ArgumentParser = CappedParser(
        prog="tunnelbench",
        description="Benchmark tunnels and VPNs in a network-namespace lab.",
    )
    top.add_argument("--version", action="version", version=f"tunnelbench {__version__}")
    top.add_argument("-v", "--verbose", action="store_true", help="log every command run")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb in VERBS:
        verb.register(verbs)
    # The whole command line, for `completion`, which describes it.
    top.set_defaults(parser=top)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    database_from_variable(db_from_variable(args))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(name)s: %(message)s",
    )
    stdout = sys.stdout
    sys.stdout = cast(TextIO, _NamedStdout(stdout))
    try:
        # SIGTERM gets the same orderly teardown as Ctrl-C; both are answered where the
        # code checks for them, never lost (system.interrupts).
        with interrupts.installed():
            return _call(args)
    finally:
        sys.stdout = stdout


def _call(args: argparse.Namespace) -> int:
    """Run the verb; every failure becomes one line on standard error and an exit code."""
    try:
        code: int = args.func(args)
        if interrupts.requested():
            # A signal no check answered: the verb had done its work when it came.
            print("\ntunnelbench: interrupted after the work was done", file=sys.stderr)
            return 130
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
    except interrupts.Interrupted as exc:
        print(f"\ntunnelbench: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        torn = "; the lab was torn down" if args.verb in ("run", "tune", "lab") else ""
        if getattr(args, "hosts", None) and args.verb == "run":
            torn = "; the run's changes were undone on every host it could reach"
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
