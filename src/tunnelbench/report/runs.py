"""The list of stored runs (``tunnelbench runs``): id, start, duration, plan, trials,
status, and the label the user gave (when any run has one)."""

import time

from tunnelbench.bench.progress import format_duration
from tunnelbench.bench.store import Store
from tunnelbench.lab.state import process_start_time
from tunnelbench.model.records import RunRecord, RunStatus
from tunnelbench.report.fit import aligned
from tunnelbench.report.json_report import planned_trials

HEADER = ["id", "started", "took", "plan", "trials", "status"]
NUMERIC = {0, 2}


def utc(timestamp: float) -> str:
    """A time as reports show it: to the minute, in UTC (readers may be anywhere)."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(timestamp))


def status(run: RunRecord) -> str:
    """The run's status; ``killed`` for a run stored as running whose process is gone
    (its recorded PID no longer that process, by its start time): a run ended by SIGKILL
    or a crash, in the lab or on hosts, marks nothing itself. ``--resume`` takes it."""
    owner = run.owner or {}
    running = run.status is RunStatus.RUNNING and "pid" in owner
    if running and process_start_time(int(owner["pid"])) != owner.get("start_time"):
        return KILLED
    return run.status.value


#: What :func:`status` calls a running run whose process is gone.
KILLED = "killed"


def trials_cell(counts: dict[str, int], planned: int) -> str:
    """``12 (12 ok)``, ``48 (24 ok, 24 skipped)``, ``5 of 12 (5 ok)`` for a stopped run;
    a run with adaptive repetitions may store more than ``planned`` (its minimum)."""
    stored = sum(counts.values())
    parts = ", ".join(f"{counts[s]} {s}" for s in ("ok", "failed", "skipped") if counts.get(s))
    of = f" of {planned}" if stored < planned else ""  # adaptive rounds add to planned
    return f"{stored}{of}" + (f" ({parts})" if parts else "")


def row(store: Store, run: RunRecord) -> list[str]:
    experiment = run.experiment
    took = "-" if run.ended_at is None else format_duration(run.ended_at - run.started_at)
    return [
        str(run.id),
        utc(run.started_at),
        took,
        experiment.name or "-",
        trials_cell(store.trial_counts(run.id), planned_trials(experiment)),
        status(run),
    ]


def render(store: Store) -> str:
    runs = store.runs()
    if not runs:
        return f"no runs stored in {store.path} yet"
    body = [row(store, run) for run in runs]
    if any(run.label for run in runs):
        return "\n".join(
            aligned(
                [*HEADER, "label"],
                [[*cells, run.label or "-"] for cells, run in zip(body, runs, strict=True)],
                NUMERIC,
            )
        )
    return "\n".join(aligned(HEADER, body, NUMERIC))
