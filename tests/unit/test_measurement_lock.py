"""The host-wide measurement lock: one measurement at a time, unless asked otherwise."""

import os

import pytest

from tunnelbench.bench.measurement_lock import acquire
from tunnelbench.errors import UserError
from tunnelbench.model.environment import Environment
from tunnelbench.model.lockrecord import LockMode, LockRecord
from tunnelbench.model.plan import Experiment


def test_a_second_measurement_is_refused_naming_the_first(tmp_path):
    path = tmp_path / "m.lock"
    first = acquire(allow_concurrent=False, path=path)
    try:
        with pytest.raises(UserError) as refused:
            acquire(allow_concurrent=False, path=path)
        message = str(refused.value)
        assert f"another tunnelbench measurement is running (pid {os.getpid()}," in message
        assert "--allow-concurrent" in message and "\n" not in message
    finally:
        first.release()
    # Released: the next one runs.
    acquire(allow_concurrent=False, path=path).release()


def test_allow_concurrent_runs_beside_it_and_says_beside_whom(tmp_path):
    path = tmp_path / "m.lock"
    first = acquire(allow_concurrent=False, path=path)
    try:
        beside = acquire(allow_concurrent=True, path=path)
        assert beside.mode == "none"
        holder = beside.record().concurrent_with
        assert holder is not None and holder.pid == os.getpid()
    finally:
        first.release()


def test_a_concurrent_run_holds_the_lock_shared_so_a_normal_run_still_refuses(tmp_path):
    path = tmp_path / "m.lock"
    shared = acquire(allow_concurrent=True, path=path)
    assert shared.record().to_json() == {"mode": "shared", "concurrent_with": None}
    try:
        with pytest.raises(UserError, match="another tunnelbench measurement holds"):
            acquire(allow_concurrent=False, path=path)
        also = acquire(allow_concurrent=True, path=path)  # two concurrent runs: both said so
        assert also.mode == "shared"
        also.release()
    finally:
        shared.release()


def test_a_dead_holders_record_is_not_named(tmp_path):
    path = tmp_path / "m.lock"
    path.write_text('{"pid": 1, "start_time": -5, "since": 0, "command": "old"}')
    shared = acquire(allow_concurrent=True, path=path)
    try:
        with pytest.raises(UserError) as refused:
            acquire(allow_concurrent=False, path=path)
        assert "pid 1" not in str(refused.value)
    finally:
        shared.release()


def test_the_holder_learns_who_ran_beside_it_and_records_it(tmp_path):
    from tunnelbench.bench import runner
    from tunnelbench.bench.store import Store

    path = tmp_path / "m.lock"
    holder = acquire(allow_concurrent=False, path=path)
    try:
        assert holder.beside() == ()
        beside = acquire(allow_concurrent=True, path=path)
        assert beside.mode == "none"
        (other,) = holder.beside()
        assert other.pid == os.getpid() and other.command
        assert beside.beside() == ()  # its own record is not another run
    finally:
        holder.release()
    store = Store(tmp_path / "r.db")
    run_id = store.start_run(
        "x", Experiment(()), Environment(measurement_lock=holder.record()), runner.owner()
    )
    store.add_concurrent(runner.owner(), (other,))
    store.add_concurrent(runner.owner(), (other,))  # said twice, kept once
    lock = store.run(str(run_id)).environment.measurement_lock
    assert lock == LockRecord(LockMode.EXCLUSIVE, None, (other,))
    store.close()
    # The next exclusive holder keeps only the records of runs still alive.
    acquire(allow_concurrent=False, path=path).release()
    assert len((tmp_path / "m.lock.beside").read_text().splitlines()) == 1  # this process
