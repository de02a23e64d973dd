"""``tunnelbench runs``: the stored runs, one line each."""

import argparse
from pathlib import Path

from tunnelbench.bench.store import DEFAULT_DB, Store
from tunnelbench.cli.parsing import Verbs
from tunnelbench.report import runs as run_list


def register(verbs: Verbs) -> None:
    runs = verbs.add_parser("runs", help="list the stored runs")
    runs.add_argument("--db", default=str(DEFAULT_DB), help="results database")
    runs.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    store = Store.read(Path(args.db))
    try:
        print(run_list.render(store))
    finally:
        store.close()
    return 0
