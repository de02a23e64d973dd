"""The store refuses paths that cannot hold a results database before creating anything,
reads without writing (no upgrade, no side file), and turns SQLite faults into one-line
storage errors."""

import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tunnelbench.bench.store import SCHEMA_VERSION, Store
from tunnelbench.errors import StorageError, UserError
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment
from tunnelbench.model.records import RunStatus


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_a_missing_directory_is_refused_and_nothing_is_created(tmp_path):
    with pytest.raises(UserError, match=r"--db: directory '.*/nowhere' does not exist"):
        Store(tmp_path / "nowhere" / "r.db")
    assert listing(tmp_path) == []


@pytest.mark.parametrize(
    "content", [b"not a database\n", b"\x00" * 4096, "plan = 1\n".encode("utf-16")]
)
def test_a_file_that_is_no_database_is_refused_and_left_alone(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    for open_ in (Store, Store.read, Store.open_existing):
        with pytest.raises(UserError, match=r"--db: '.*notes.txt' is not a tunnelbench results"):
            open_(path)
    assert path.read_bytes() == content
    assert listing(tmp_path) == ["notes.txt"]


def test_another_programs_sqlite_database_gets_no_tables(tmp_path):
    path = tmp_path / "other.db"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE photos (name TEXT)")
    other.commit()
    other.close()
    before = path.read_bytes()
    with pytest.raises(UserError, match="is not a tunnelbench results database"):
        Store(path)
    with pytest.raises(UserError, match="is not a tunnelbench results database"):
        Store.read(path)
    assert path.read_bytes() == before
    assert listing(tmp_path) == ["other.db"]


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(UserError, match="is a directory"):
        Store(tmp_path)


def test_reading_never_upgrades_and_creates_no_file(tmp_path):
    """A version-2 database (as recorded) is read as it is: byte for byte unchanged."""
    path = tmp_path / "l2.db"
    shutil.copy(FIXTURES / "runs" / "l2-tunnel-mtu.db", path)
    before = path.read_bytes()
    store = Store.read(path)
    try:
        run = store.run("latest")
        assert run.experiment.repetitions == 3
        assert run.precision is None and run.error is None
        assert store.trials(run.id)
        assert store.runs()[0].id == run.id
    finally:
        store.close()
    assert path.read_bytes() == before
    assert listing(tmp_path) == ["l2.db"]


def test_reading_refuses_a_newer_schema(tmp_path):
    path = tmp_path / "r.db"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    with pytest.raises(UserError, match="newer than this tunnelbench understands"):
        Store.read(path)


def test_reading_sees_what_a_live_writer_committed(tmp_path):
    path = tmp_path / "r.db"
    writer = Store(path)
    run_id = writer.start_run("x", Experiment(()), Environment())
    reader = Store.read(path)  # with SQLite's locks, beside the writer
    try:
        assert reader.run("latest").id == run_id
        writer.finish_run(run_id, RunStatus.FAILED, "results database: the disk holding it is full")
        assert reader.run("latest").error == "results database: the disk holding it is full"
    finally:
        reader.close()
        writer.close()


def test_nothing_of_the_database_is_memory_mapped(tmp_path):
    """No mmap of the file and no write-ahead log, whose index SQLite maps from -shm: a
    mapped file that cannot be written is a SIGBUS, not an error (issue 27)."""
    store = Store(tmp_path / "r.db")
    assert store.db.execute("PRAGMA mmap_size").fetchone() == (0,)
    assert store.db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    run_id = store.start_run("x", Experiment(()), Environment())
    reader = Store.read(tmp_path / "r.db")
    assert reader.db.execute("PRAGMA mmap_size").fetchone() == (0,)
    assert reader.run("latest").id == run_id
    assert listing(tmp_path) == ["r.db", "r.db-reserve"]  # no -wal, no -shm
    reader.close()
    store.close()


def test_a_database_left_in_wal_mode_is_converted_by_a_run_and_still_read(tmp_path):
    path = tmp_path / "l2.db"
    shutil.copy(FIXTURES / "runs" / "l2-tunnel-mtu.db", path)
    assert path.read_bytes()[18:20] == b"\x02\x02"  # as recorded: WAL
    Store(path).close()
    assert path.read_bytes()[18:20] == b"\x01\x01"  # a rollback journal
    store = Store.read(path)
    assert store.run("latest").experiment.repetitions == 3
    store.close()
    assert listing(tmp_path) == ["l2.db"]


@pytest.fixture
def immutable(tmp_path) -> Iterator[Callable[[Path], None]]:
    """``immutable(path)``: chattr +i, undone after the test; skipped where the file
    system has no such attribute or the test is not root."""
    frozen: list[Path] = []

    def freeze(path: Path) -> None:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i: {done.stderr.strip()}")
        frozen.append(path)

    yield freeze
    for path in frozen:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_database_that_turns_immutable_under_a_run_fails_its_next_write_cleanly(
    tmp_path, immutable
):
    """The store's side of the captured case: the next write is a StorageError naming
    the cause (under WAL it was a SIGBUS); the run cannot be marked, and says so; what
    was stored is still read."""
    path = tmp_path / "r.db"
    store = Store(path)
    run_id = store.start_run("x", Experiment(()), Environment())
    immutable(path)
    with pytest.raises(StorageError) as caught:
        store.set_label(run_id, "late", None)
    assert str(caught.value) == (
        f"results database {str(path)!r}: it cannot be written ({str(path)!r} is immutable"
        " (`lsattr`))"
    )
    error = store.abandon_run(run_id, caught.value)
    assert f"run {run_id} could not be marked failed and still reads 'running'" in str(error)
    store.close()
    reader = Store.read(path)  # beside the journal the failed write left
    assert (reader.run("latest").id, reader.run("latest").status) == (run_id, "running")
    reader.close()


def test_a_directory_that_turns_immutable_is_named_as_the_cause(tmp_path, immutable):
    path = tmp_path / "r.db"
    store = Store(path)
    immutable(tmp_path)  # no journal can be created beside the database
    with pytest.raises(StorageError) as caught:
        store.start_run("x", Experiment(()), Environment())
    assert str(caught.value) == (
        f"results database {str(path)!r}: it cannot be written ({str(tmp_path)!r} is"
        " immutable (`lsattr`))"
    )
    store.close()


def test_a_write_to_a_read_only_store_is_a_storage_error_naming_the_cause(tmp_path):
    """The same path a read-only file, mount or immutable file takes: SQLite refuses the
    write (SQLITE_READONLY), and the run hears one line with the cause, exit code 1."""
    path = tmp_path / "r.db"
    Store(path).close()
    store = Store.read(path)
    with pytest.raises(StorageError, match=r"'.*r.db': it cannot be written \(a read-only file"):
        store.start_run("x", Experiment(()), Environment())
    store.close()
    assert StorageError("x").exit_code == 1


def test_abandon_run_marks_the_run_failed_with_its_reason(tmp_path):
    store = Store(tmp_path / "r.db")
    run_id = store.start_run("x", Experiment(()), Environment())
    error = store.abandon_run(run_id, StorageError("results database 'r.db': the disk is full"))
    assert str(error).startswith("results database 'r.db': the disk is full. 0 finished trial")
    assert f"run {run_id} is marked failed" in str(error)
    assert f"tunnelbench run --resume {run_id} --db" in str(error)
    run = store.run("latest")
    assert (run.status, run.error) == ("failed", "results database 'r.db': the disk is full")
