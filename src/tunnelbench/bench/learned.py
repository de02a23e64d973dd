"""What a trial and a guest's start cost on this machine, learned from its stored trials.

`plan show` and a run's first ETA count each trial's traffic plus an overhead: where its
lab is built or kept, on the host or in a VM guest, and a boot per guest. The reference
machine's figures (:data:`tunnelbench.bench.planfile.REFERENCE`) are right only there;
a router-sized box or a 32-core server is slower or faster at building labs and starting
processes. So each figure is the median over the newest stored trials of that kind
(:data:`RECENT`), once there are :data:`ENOUGH` of them, from runs on a machine like this
one: the same kernel release, CPU model and core count (what a run's environment
records). A trial's overhead is its wall time less its warm-up (as it ended, where it
ended on evidence) and window; a boot is the time from a run's start to its first trial,
where that trial ran in a guest, less the run's own start. Anything without enough
trials keeps the reference figure, and what was learned is said with the estimate.
"""

import statistics
from collections.abc import Mapping
from dataclasses import Field, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from tunnelbench.bench import environment
from tunnelbench.bench.planfile import REFERENCE, RUN_START_S, Overheads
from tunnelbench.bench.store import Store
from tunnelbench.model.environment import Environment
from tunnelbench.model.records import RunRecord, TimedTrial

RECENT = 300  # the newest trials read
ENOUGH = 5  # trials (or boots) of a kind before their median replaces the reference


def overheads(db: Path) -> Overheads:
    """This machine's figures from the database at ``db``; the reference machine's where
    it does not exist or holds too few trials of a kind."""
    if not db.is_file():
        return REFERENCE
    store = Store.read(db)
    try:
        return from_store(store)
    finally:
        store.close()


def from_store(store: Store) -> Overheads:
    """This machine's figures from an open store (a run's own, for its first ETA)."""
    return learn(store.runs(), store.timed_trials(RECENT), environment.machine())


def traffic_seconds(trial: TimedTrial) -> float:
    """The part of a trial's wall time that was traffic: its warm-up, as it ended where it
    ended on evidence (else as its settings had it), and its window."""
    warmup = trial.warmup_s if trial.warmup_s is not None else trial.expected_warmup
    return trial.duration + warmup


def learn(runs: list[RunRecord], timed: list[TimedTrial], machine: Environment) -> Overheads:
    """The medians of the trials of ``runs`` whose machine is ``machine``."""
    here = {r.id: r for r in runs if r.environment.same_machine(machine)}
    samples: dict[str, list[float]] = {}
    for trial in timed:
        if trial.run_id not in here or trial.lab_fresh is None:
            continue
        field = ("vm_" if trial.in_vm else "") + ("built_s" if trial.lab_fresh else "kept_s")
        samples.setdefault(field, []).append(max(0.0, trial.seconds - traffic_seconds(trial)))
    samples["vm_boot_s"] = [
        trial.started_at - here[trial.run_id].started_at - RUN_START_S
        for trial in timed
        if trial.run_id in here and trial.seq == 1 and trial.in_vm
    ]
    return with_medians(REFERENCE, samples)


class _Figures(Protocol):
    """A dataclass of seconds per kind of overhead, with ``learned`` among its fields."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]


Figures = TypeVar("Figures", bound=_Figures)


def with_medians(reference: Figures, samples: Mapping[str, list[float]]) -> Figures:
    """``reference`` with each field that has :data:`ENOUGH` samples set to their median
    (in seconds, to 0.01), and ``learned`` naming those fields and their counts."""
    learned = {
        field: (round(statistics.median(values), 2), len(values))
        for field, values in samples.items()
        if len(values) >= ENOUGH
    }
    if not learned:
        return reference
    return replace(
        reference,
        **{field: value for field, (value, _) in learned.items()},
        learned=tuple(sorted((field, count) for field, (_, count) in learned.items())),
    )
