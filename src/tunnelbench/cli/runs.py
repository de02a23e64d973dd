"""``tunnelbench runs``: the stored runs, one line each (or, with ``--json``, a list of
objects of plain values: the shape is documented in the README's Conventions)."""

import argparse
import json
from pathlib import Path
from typing import Any

from tunnelbench.bench.store import Store
from tunnelbench.cli.parsing import Verbs, add_db_argument
from tunnelbench.model.records import RunRecord
from tunnelbench.report import runs as run_list
from tunnelbench.report.json_report import planned_trials


def register(verbs: Verbs) -> None:
    runs = verbs.add_parser("runs", help="list the stored runs")
    add_db_argument(runs)
    runs.add_argument("--json", action="store_true", help="as a JSON list of runs")
    runs.set_defaults(func=handle)


def to_json(store: Store, run: RunRecord) -> dict[str, Any]:
    """One run as the table shows it, in plain values: times in seconds since the epoch
    (``ended_at`` and ``duration_s`` null while it has not ended)."""
    experiment = run.experiment
    counts = store.trial_counts(run.id)
    stored = sum(counts.values())
    return {
        "id": run.id,
        "started_at": run.started_at,
        "started": run_list.utc(run.started_at),
        "ended_at": run.ended_at,
        "duration_s": None if run.ended_at is None else run.ended_at - run.started_at,
        "plan": experiment.name,
        "status": run_list.status(run),
        "label": run.label,
        "notes": run.notes,
        "trials": {
            "stored": stored,
            # A tuning session plans no trials (its steps' rounds follow its measurements):
            # as the JSON report says, what it ran is what it planned.
            "planned": stored if run.tune is not None else planned_trials(experiment),
            **{status: counts.get(status, 0) for status in ("ok", "failed", "skipped")},
        },
    }


def handle(args: argparse.Namespace) -> int:
    store = Store.read(Path(args.db))
    try:
        if args.json:
            print(json.dumps([to_json(store, run) for run in store.runs()], indent=2))
        else:
            print(run_list.render(store))
    finally:
        store.close()
    return 0
