"""``tunnelbench runs``: the stored runs, one line each."""

import argparse
from pathlib import Path

from tunnelbench.bench.store import Store
from tunnelbench.cli.parsing import Verbs, add_db_argument
from tunnelbench.report import runs as run_list


def register(verbs: Verbs) -> None:
    runs = verbs.add_parser("runs", help="list the stored runs")
    add_db_argument(runs)
    runs.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    store = Store.read(Path(args.db))
    try:
        print(run_list.render(store))
    finally:
        store.close()
    return 0
