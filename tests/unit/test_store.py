"""The SQLite store: round trip, per-trial durability, schema versioning."""

import sqlite3

import pytest

from tests.conftest import FIXTURES
from tunnelbench.analysis.precision import Precision, State
from tunnelbench.bench.store import SCHEMA_VERSION, Store
from tunnelbench.errors import UserError
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, TrialConfig
from tunnelbench.model.records import Resolved, RunStatus, TrialStatus


def _add(store: Store, run_id: int, seq: int) -> int:
    return store.add_trial(
        run_id, seq=seq, repetition=1, config_key="k", config=TrialConfig(),
        resolved=Resolved.from_dict({"lab_id": "abc"}), status=TrialStatus.OK, error=None,
        started_at=0.0,
        metrics={"goodput_bps": 1e9 * seq}, artifacts={"iperf3": [{"end": {}}]},
    )  # fmt: skip


def test_round_trip(tmp_path):
    store = Store(tmp_path / "r.db")
    run_id = store.start_run("tunnelbench run", Experiment(()), Environment(kernel="x"))
    trial_id = _add(store, run_id, 1)
    store.finish_run(run_id, RunStatus.COMPLETE)
    run = store.run("latest")
    assert (run.id, run.status, run.environment) == (run_id, "complete", Environment(kernel="x"))
    (trial,) = store.trials(run_id)
    assert trial.metrics == {"goodput_bps": 1e9}
    assert trial.resolved.to_dict() == {"lab_id": "abc"}
    assert store.artifact(trial_id, "iperf3") == [{"end": {}}]
    assert store.run(str(run_id)).id == run_id


def test_finished_trials_are_visible_before_the_run_ends(tmp_path):
    """A crash after a trial must not lose it: another connection sees it at once."""
    store = Store(tmp_path / "r.db")
    run_id = store.start_run("x", Experiment(()), Environment())
    _add(store, run_id, 1)
    other = sqlite3.connect(tmp_path / "r.db")
    assert other.execute("SELECT COUNT(*) FROM trials").fetchone() == (1,)
    assert other.execute("SELECT status FROM runs").fetchone() == ("running",)


def test_a_newer_schema_is_refused(tmp_path):
    Store(tmp_path / "r.db").close()
    db = sqlite3.connect(tmp_path / "r.db")
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION + 1,))
    db.commit()
    with pytest.raises(UserError, match="newer than this tunnelbench understands"):
        Store(tmp_path / "r.db")


def test_unknown_runs_are_clear_errors(tmp_path):
    store = Store(tmp_path / "r.db")
    with pytest.raises(UserError, match="no runs stored"):
        store.run("latest")
    with pytest.raises(UserError, match="no run 7"):
        store.run("7")
    with pytest.raises(UserError, match="'x' is not a run id"):
        store.run("x")
    with pytest.raises(UserError, match="no results database"):
        Store.open_existing(tmp_path / "missing.db")


def test_a_version_2_database_gains_the_later_columns(tmp_path):
    # The recorded runs were stored by schema version 2 (before adaptive repetitions).
    from tests.report_fixtures import recorded

    path = tmp_path / "l2-tunnel-mtu.db"
    before = sqlite3.connect(FIXTURES / "runs" / "l2-tunnel-mtu.db")
    assert before.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
        "2",
    )
    store = recorded("l2-tunnel-mtu", tmp_path)
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    run = store.run("latest")
    # Columns are read by position: the new one must not shift the others.
    assert run.precision is None and set(run.owner or {}) == {"pid", "start_time"}
    assert run.experiment.repetitions == 3
    stored = {"k": {"state": "not met", "half_width_pct": 3.4, "runs": 10, "attempts": 10}}
    store.set_precision(run.id, {"k": Precision.from_dict(stored["k"])})
    assert store.run(str(run.id)).precision == stored


def test_a_new_run_has_no_precision_until_the_runner_records_it(tmp_path):
    store = Store(tmp_path / "r.db")
    run_id = store.start_run("x", Experiment(()), Environment(), {"pid": 1, "start_time": 2})
    run = store.run("latest")
    assert (run.precision, run.owner) == (None, {"pid": 1, "start_time": 2})
    store.set_precision(run_id, {"k": Precision(State.MET, 1.5, 3, 3)})
    met = {"state": "met", "half_width_pct": 1.5, "runs": 3, "attempts": 3}
    assert store.run("latest").precision == {"k": met}
