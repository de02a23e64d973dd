"""The run's environment, declared once: every recorded run's record reads into the
typed :class:`Environment` and writes back the same JSON, key order included, so a
database written before the declaration reads and reports as it did."""

import json
import sqlite3
from pathlib import Path

import pytest

from tunnelbench.model.environment import KEYS, Environment

RUNS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "runs").glob("*.db"))


@pytest.mark.parametrize("db", RUNS, ids=lambda p: p.stem)
def test_a_recorded_environment_reads_as_fields_and_writes_back_the_same(db: Path) -> None:
    with sqlite3.connect(db) as connection:
        stored = [json.loads(row[0]) for row in connection.execute("SELECT environment FROM runs")]
    for data in stored:
        env = Environment.from_dict(data)
        assert list(env.to_dict().items()) == list(data.items())
        assert env.other == {}, "a key the recorded runs hold is not declared"
        assert env.kernel == data["kernel"] and env.cores == data["cores"]


def test_an_undeclared_key_is_kept_and_a_guest_is_a_record_of_its_own() -> None:
    data = {"kernel": "k", "future_key": {"x": 1}, "guests": {"debian": {"vm_cpus": 2}}}
    env = Environment.from_dict(data)
    assert env.other == {"future_key": {"x": 1}}
    assert env.guest("debian") == Environment(vm_cpus=2)
    assert env.to_dict() == data


def test_every_key_names_its_owner_and_a_record_stores_keys_as_written() -> None:
    assert all(k.owners and k.doc for k in KEYS)
    env = Environment(versions={"iperf3": "3.16"}, kernel="k", cpu_flags=("aes",))
    assert list(env.to_dict()) == ["kernel", "cpu_flags", "versions"]
    assert env.to_dict()["cpu_flags"] == ["aes"]
    # A writer's keys keep its order, and an unknown value stays a null (the report
    # schema documents a null governor), unlike a key nobody wrote.
    written = Environment().with_keys(kernel="k", cores=None, cpu_governor=None)
    written = written.with_keys(versions={}, kernel="k2")
    assert written.to_dict() == {
        "kernel": "k2",
        "cores": None,
        "cpu_governor": None,
        "versions": {},
    }
