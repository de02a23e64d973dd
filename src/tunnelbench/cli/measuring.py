"""What the verbs that measure (``run``, ``tune``) share: their output options, the
measurement lock and the store they hold while they measure, and how they end."""

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tunnelbench.bench import measurement_lock, runner
from tunnelbench.bench.store import Store
from tunnelbench.cli.parsing import add_db_argument
from tunnelbench.cli.report import write_reports
from tunnelbench.errors import StorageError
from tunnelbench.model.lockrecord import LockRecord
from tunnelbench.report import fit, terminal
from tunnelbench.report.view import RunView

LABEL_MAX, NOTES_MAX = 80, 2000


def _text(limit: int, name: str) -> Callable[[str], str]:
    def checked(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"the {name} is empty")
        if len(text) > limit:
            raise argparse.ArgumentTypeError(
                f"the {name} has {len(text)} characters; at most {limit}"
            )
        if any(not c.isprintable() and (name == "label" or c not in "\n\t") for c in text):
            raise argparse.ArgumentTypeError(f"the {name} holds a control character")
        return text.strip()

    return checked


def add_measuring_arguments(parser: argparse.ArgumentParser) -> None:
    """The database, the run's label and notes, the concurrency override and how
    progress is shown."""
    add_db_argument(parser)
    parser.add_argument(
        "--label",
        type=_text(LABEL_MAX, "label"),
        help=f"a short name for the run, shown by `runs`, the reports and compare (≤ {LABEL_MAX}"
        " characters)",
    )
    parser.add_argument(
        "--notes",
        type=_text(NOTES_MAX, "notes"),
        help="what the run is for, kept with it and shown in the reports",
    )
    parser.add_argument(
        "--allow-concurrent",
        action="store_true",
        help="run even while another tunnelbench measurement runs on this machine (both"
        " runs' figures are then false; recorded with the run)",
    )
    parser.add_argument(
        "--no-reports",
        action="store_true",
        help="store the run only: no HTML and Markdown reports beside the database"
        " (`tunnelbench report` writes them later)",
    )
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    shown.add_argument("--json", action="store_true", help="progress as JSON lines, no table")


@contextmanager
def holding(args: argparse.Namespace, *, existing: bool) -> Iterator[tuple[Store, LockRecord]]:
    """The measurement lock, then the store (``existing``: one to resume a run in), both
    released however the block ends; yields the store and how the lock is held, for the
    run's environment. Call it after every check of the input: it creates the database."""
    lock = measurement_lock.acquire(allow_concurrent=args.allow_concurrent)
    try:
        store = Store.open_existing(Path(args.db)) if existing else Store(Path(args.db))
        try:
            yield store, lock.record()
        finally:
            # Runs that measured beside this one (they said so when they started):
            # recorded with this run too, not only with theirs.
            if others := lock.beside():
                with contextlib.suppress(StorageError):
                    store.add_concurrent(runner.owner(), others)
            store.close()
    finally:
        lock.release()


def describe(args: argparse.Namespace, store: Store, run_id: int) -> None:
    """Give the run the label and notes the command line names (a resumed run keeps its
    own unless new ones are given)."""
    if args.label is not None or args.notes is not None:
        store.set_label(run_id, args.label, args.notes)


def finished(loaded: RunView, db: str, *, as_json: bool, reports: bool = True) -> bool:
    """The end of a verb that measured: the run's table and findings (not in JSON mode,
    whose event stream has said everything), where it is stored, and the reports beside
    the database unless ``reports`` is False; whether the reports asked for could be
    written."""
    if not as_json:
        run_id = loaded.run.id
        print()
        colour = fit.colour_wanted(sys.stdout)
        text = terminal.render(loaded, after_run=True, width=fit.width(), colour=colour, db=db)
        print(text)
        # Not wrapped: scripts and users find the run by this line, path and command whole.
        print(f"\nstored as run {run_id} in {db}; `tunnelbench report {run_id} --db {db}`")
    return write_reports(loaded, as_json=as_json) if reports else True
