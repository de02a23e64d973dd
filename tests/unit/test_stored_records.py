"""Stored runs read back as typed records: a trial's configuration, a run's experiment
and a tuning session's record, as the store wrote them (today's shape, and the shapes of
the recorded runs, written by earlier versions that lacked later settings), load as
:class:`TrialConfig`, :class:`Experiment` and :class:`TuneRecord` without losing a
stored value, and today's shape is written back as it was read."""

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tests.report_fixtures import recorded
from tunnelbench.bench import planfile
from tunnelbench.bench.store import Store
from tunnelbench.kinds import Cipher, Placement, Queue, TunnelKind, WanEncapsulation
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import (
    LEGACY,
    Experiment,
    LabSettings,
    LinkSettings,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
    flatten,
)
from tunnelbench.model.records import Resolved
from tunnelbench.model.tuning import TuneRecord

RUNS = sorted((FIXTURES / "runs").glob("*.db"))
SCENARIOS = sorted((Path(__file__).parents[2] / "scenarios").glob("*.toml"))


def _json(data: object) -> Any:
    """``data`` as the store holds it (JSON: tuples are lists)."""
    return json.loads(json.dumps(data))


def _stored(db: Path, query: str) -> list[Any]:
    """The JSON column ``query`` selects, of a recorded database, as stored."""
    with closing(sqlite3.connect(f"file:{db}?immutable=1", uri=True)) as conn:
        rows = conn.execute(query).fetchall()
    return [json.loads(row[0]) for row in rows if row[0] is not None]


def _stored_configs(db: Path) -> list[dict[str, Any]]:
    return _stored(db, "SELECT config FROM trials ORDER BY run_id, seq")


def _complete(config: dict[str, Any]) -> bool:
    """Whether a stored configuration has every setting today's has."""
    return set(flatten(config)) == set(flatten(TrialConfig().to_dict()))


def test_a_configuration_of_todays_shape_reads_back_equal():
    config = TrialConfig(
        lab=LabSettings(
            wan=LinkSettings(rate=100_000_000, queue=Queue.BFIFO, queue_bytes=75_000, delay=5000),
            placement=Placement.PINNED,
        ),
        tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD, mtu=1400, cipher=Cipher.AUTO),
        traffic=TrafficSettings(streams=4, warmup=None),
    )
    stored = _json(config.to_dict())
    assert isinstance(stored, dict)
    assert TrialConfig.from_dict(stored) == config


def test_a_configuration_stored_before_later_settings_takes_what_it_ran_with():
    """A configuration written before the WAN's encapsulation, impairments and the
    warm-up's bound existed (the shape of the recorded runs): they take the values every
    earlier version ran with, and its key is the key of today's equal configuration."""
    stored = _json(TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.VXLAN)).to_dict())
    assert isinstance(stored, dict)
    for key in ("encapsulation", "delay", "jitter", "loss", "reorder", "queue_bytes"):
        del stored["lab"]["wan"][key]
    del stored["traffic"]["warmup_max"]
    for key in ("cipher", "esp_mode", "protection"):
        del stored["tunnel"][key]
    read = TrialConfig.from_dict(stored)
    assert read.lab.wan.encapsulation is WanEncapsulation.NONE
    assert read.tunnel.cipher is Cipher.AUTO
    assert read == TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.VXLAN))
    assert read.key() == TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.VXLAN)).key()


def _ran_with() -> dict[str, object]:
    """Every setting path with the value a configuration that lacks it ran with: that of
    LEGACY (a section's value covers its settings), else today's default."""
    out = flatten(_json(TrialConfig().to_dict()))
    for path, value in LEGACY.items():
        key = ".".join(path)
        if isinstance(value, dict):
            out |= flatten(value, key + ".")
        else:
            out[key] = value
    return out


@pytest.mark.parametrize("db", RUNS, ids=[db.stem for db in RUNS])
def test_every_recorded_trial_keeps_every_stored_setting(db: Path, tmp_path: Path):
    """Each recorded run's trials, read through the store, carry every value their
    stored configuration held; a setting it lacks is the one it ran with."""
    stored = _stored_configs(db)
    store = recorded(db.stem, tmp_path)
    try:
        trials = [t for run in store.runs() for t in store.trials(run.id)]
    finally:
        store.close()
    ran_with = _ran_with()
    assert trials and len(trials) == len(stored)
    for raw, trial in zip(stored, trials, strict=True):
        assert isinstance(trial.config, TrialConfig)
        was = flatten(raw)
        now = flatten(_json(trial.config.to_dict()))
        assert set(was) <= set(now), db.stem
        for path, value in now.items():
            assert value == was.get(path, ran_with[path]), (db.stem, trial.seq, path)
        # Its settings by path make the same configuration again (as a plan's do).
        assert TrialConfig.from_settings(trial.config.settings()) == trial.config


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_experiment_reads_back_equal(path: Path, tmp_path: Path):
    """An experiment written and read again, directly, through JSON and through the
    store, is the same experiment, and today's stored form is written back unchanged."""
    experiment = planfile.load(path).experiment
    stored = _json(experiment.to_dict())
    assert Experiment.from_dict(experiment.to_dict()) == experiment
    assert Experiment.from_dict(stored) == experiment
    assert Experiment.from_dict(stored).to_dict() == stored
    store = Store(tmp_path / "r.db")
    try:
        store.start_run("tunnelbench run", experiment, Environment())
        assert store.run("latest").experiment == experiment
    finally:
        store.close()


@pytest.mark.parametrize("db", RUNS, ids=[db.stem for db in RUNS])
def test_a_recorded_runs_experiment_and_tuning_session_read_back(db: Path, tmp_path: Path):
    """A recorded run's experiment and tuning record load typed; written again they
    read back equal, and one stored in today's shape is written as it was stored
    (a tuple of settings was once written as a tuple, read back as JSON's list)."""
    (experiment,) = _stored(db, "SELECT experiment FROM runs")
    store = recorded(db.stem, tmp_path)
    try:
        run = store.run("latest")
    finally:
        store.close()
    assert run.experiment == Experiment.from_dict(experiment)
    assert Experiment.from_dict(_json(run.experiment.to_dict())) == run.experiment
    if all(_complete(c) for c in experiment["configs"]) and "fresh_labs" in experiment:
        assert run.experiment.to_dict() == experiment
    tunes = _stored(db, "SELECT tune FROM runs") if "tune" in db.stem else []
    assert (run.tune is not None) == bool(tunes)
    if run.tune is not None:
        assert TuneRecord.from_dict(run.tune.to_dict()) == run.tune
        steps = tunes[0]["steps"]
        configs = [s["best_config"] for s in steps] + [
            c["config"] for s in steps for c in s["candidates"]
        ]
        if all(_complete(c) for c in configs):
            assert run.tune.to_dict() == tunes[0]


@pytest.mark.parametrize("db", RUNS, ids=[db.stem for db in RUNS])
def test_a_recorded_trials_flat_resolved_record_reads_grouped_and_writes_back_flat(db: Path):
    """``Resolved`` groups its fields by owner; the store keeps the flat keys every
    version wrote: each reads into its group's field, and the record is written back as
    it was stored (less the declared tunnel facts of a version before ``kernel_path``,
    which the store asks the kind for again)."""
    for stored in _stored(db, "SELECT resolved FROM trials"):
        resolved = Resolved.from_dict(stored)
        for key, group, name in (
            ("tunnel_implementation", resolved.setup, "implementation"),
            ("tunnel_mtu", resolved.setup, "mtu"),
            ("esp_implementation", resolved.esp, "implementation"),
            ("esp_encapsulation", resolved.esp, "encapsulation"),
            ("openvpn_dco", resolved.openvpn, "dco"),
            ("virtualization", resolved.where, "virtualization"),
            ("lab_id", resolved.lab, "id"),
            ("lab_fresh", resolved.lab, "fresh"),
            ("rps", resolved.lab, "rps"),
            ("processes", resolved.traffic, "processes"),
            ("congestion", resolved.traffic, "congestion"),
        ):
            assert getattr(group, name) == stored.get(key), (db.stem, key)
        assert resolved.traffic.stream_mode == stored.get("stream_mode")
        assert resolved.lab.families == (
            None if stored.get("lab_families") is None else tuple(stored["lab_families"])
        )
        facts = stored.get("tunnel_facts")
        if facts is not None and "kernel_path" not in facts:
            stored = {k: v for k, v in stored.items() if k != "tunnel_facts"}
        assert resolved.to_dict() == stored, db.stem
        assert resolved.extra == {}, db.stem
