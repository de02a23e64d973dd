"""Stored runs read back as typed records: a trial's configuration as the store wrote it
(today's shape, and the shapes of the recorded runs, written by earlier versions that
lacked later settings) loads as a :class:`TrialConfig` without losing a stored value."""

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.report_fixtures import recorded
from tunnelbench.kinds import Cipher, Placement, Queue, TunnelKind, WanEncapsulation
from tunnelbench.model.plan import (
    LEGACY,
    LabSettings,
    LinkSettings,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
    flatten,
)

RUNS = sorted((FIXTURES / "runs").glob("*.db"))


def _json(data: object) -> object:
    """``data`` as the store holds it (JSON: tuples are lists)."""
    return json.loads(json.dumps(data))


def _stored_configs(db: Path) -> list[dict[str, object]]:
    with closing(sqlite3.connect(f"file:{db}?immutable=1", uri=True)) as conn:
        rows = conn.execute("SELECT config FROM trials ORDER BY run_id, seq").fetchall()
    return [json.loads(row[0]) for row in rows]


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
    out = flatten(_json(TrialConfig().to_dict()))  # type: ignore[arg-type]
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
        now = flatten(_json(trial.config.to_dict()))  # type: ignore[arg-type]
        assert set(was) <= set(now), db.stem
        for path, value in now.items():
            assert value == was.get(path, ran_with[path]), (db.stem, trial.seq, path)
