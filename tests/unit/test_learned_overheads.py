"""The estimate's overheads learned from the store (bench/learned): a real SQLite store
holding trials whose wall time is known, on this machine and on another one."""

import json
import sqlite3
import time
from pathlib import Path

import pytest

from tunnelbench.bench import environment, learned, planfile
from tunnelbench.bench.planfile import REFERENCE, RUN_START_S, estimate_seconds
from tunnelbench.bench.store import Store
from tunnelbench.cli.plan import render, to_json
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, LabSettings, TrafficSettings, TrialConfig, expand
from tunnelbench.model.records import LabFound, Resolved, TrialStatus


def config(kernel: str | None = None, duration: int = 2) -> TrialConfig:
    return TrialConfig(
        lab=LabSettings() if kernel is None else LabSettings(kernel=kernel),
        traffic=TrafficSettings(duration=duration, warmup=1),
    )


def store_run(
    store: Store,
    env: Environment,
    trials: list[tuple[TrialConfig, bool, float]],
    *,
    boot: float = 0,
) -> None:
    """A run whose trials (configuration, lab built, seconds besides the traffic) ran one
    after the other, the first ``boot`` seconds after the run's own start."""
    run_id = store.start_run("tunnelbench run", Experiment(()), env)
    began = time.time() - 10_000
    at = began + RUN_START_S + boot
    ended = []
    for seq, (trial_config, built, extra) in enumerate(trials, start=1):
        trial_id = store.add_trial(
            run_id, seq=seq, repetition=1, config_key=trial_config.key(),
            config=trial_config, resolved=Resolved(lab=LabFound(fresh=built)),
            status=TrialStatus.OK, error=None, started_at=at,
            metrics={"goodput_bps": 1e6}, artifacts={},
        )  # fmt: skip
        at += trial_config.traffic.duration + 1 + extra
        ended.append((at, trial_id))
    # The store stamps a run's start and a trial's end with its own clock: set them as
    # they would have been.
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE runs SET started_at = ? WHERE id = ?", (began, run_id))
        db.executemany("UPDATE trials SET ended_at = ? WHERE id = ?", ended)


@pytest.fixture
def here() -> Environment:
    return environment.machine().with_keys(versions={})


def test_the_medians_of_this_machines_trials_replace_the_reference(tmp_path: Path, here):
    store = Store(tmp_path / "r.db")
    built = [(config(), True, extra) for extra in (2.0, 2.2, 2.4, 2.6, 9.0)]
    kept = [(config(), False, extra) for extra in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)]
    store_run(store, here, built + kept)
    # Another machine's slow trials are not this one's.
    elsewhere = here.with_keys(cpu_model="ARM Cortex-A72", cores=4)
    store_run(store, elsewhere, [(config(), True, 30.0)] * 6)
    store.close()

    found = learned.overheads(tmp_path / "r.db")
    assert found.built_s == pytest.approx(2.4, abs=0.05)  # the median: 9.0 is one slow trial
    assert found.kept_s == pytest.approx(0.55, abs=0.05)
    assert dict(found.learned) == {"built_s": 5, "kept_s": 6}
    # No VM trials stored: the reference machine's figures stand.
    assert (found.vm_built_s, found.vm_kept_s, found.vm_boot_s) == (
        REFERENCE.vm_built_s, REFERENCE.vm_kept_s, REFERENCE.vm_boot_s
    )  # fmt: skip
    trials = expand(Experiment(configs=(config(),), repetitions=3))
    # One lab built, then kept twice: 3 x 3 s of traffic and the learned overheads.
    assert estimate_seconds(trials, overheads=found) - estimate_seconds(trials) == pytest.approx(
        (2.4 - REFERENCE.built_s) + 2 * (0.55 - REFERENCE.kept_s), abs=0.1
    )


def test_too_few_trials_of_a_kind_keep_the_reference(tmp_path: Path, here):
    store = Store(tmp_path / "r.db")
    store_run(store, here, [(config(), True, 5.0)] * (learned.ENOUGH - 1))
    store.close()
    assert learned.overheads(tmp_path / "r.db") == REFERENCE
    assert learned.overheads(tmp_path / "none.db") == REFERENCE
    assert not (tmp_path / "none.db").exists()  # reading created nothing


def test_a_guests_boot_is_the_time_to_its_runs_first_trial(tmp_path: Path, here):
    store = Store(tmp_path / "r.db")
    for boot in (40.0, 41.0, 42.0, 43.0, 60.0):
        store_run(
            store, here, [(config("debian"), True, 8.0), (config("debian"), False, 4.0)], boot=boot
        )
    store.close()
    found = learned.overheads(tmp_path / "r.db")
    assert found.vm_boot_s == pytest.approx(42.0, abs=0.1)
    assert found.vm_built_s == pytest.approx(8.0, abs=0.05)
    assert found.vm_kept_s == pytest.approx(4.0, abs=0.05)


def test_plan_show_says_where_its_figures_came_from(tmp_path: Path, here):
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text('name = "p"\nrepetitions = 2\n[base]\n"traffic.duration" = 2\n')
    plan = planfile.load(plan_path)
    assert "the reference machine's figures" in render(plan)
    store = Store(tmp_path / "r.db")
    store_run(store, here, [(config(), True, 3.0)] * 5 + [(config(), False, 1.0)] * 5)
    store.close()
    found = learned.overheads(tmp_path / "r.db")
    text = render(plan, found)
    assert "~3 s where its lab is built or ~1 s where a kept lab serves it" in text
    assert "medians of 10 trials stored here" in text
    shown = to_json(plan, found)["overheads"]
    assert shown["built_s"] == {"seconds": 3.0, "learned_from": 5}
    assert shown["vm_boot_s"] == {"seconds": REFERENCE.vm_boot_s, "learned_from": None}
    json.dumps(shown)
