"""A run refuses a database it may not own before it writes a byte of it: a newer
schema, one without a version, another program's. Real SQLite files, hashed before and
after; the command line's refusals name what the user set (``--db`` or the variable)."""

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tunnelbench.bench.store import SCHEMA_VERSION, SIDE_FILES, Store
from tunnelbench.errors import UserError

SRC = Path(__file__).resolve().parents[2] / "src"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _newer(path: Path) -> None:
    """A database a newer tunnelbench wrote: a table this one does not know, a table it
    knows missing, the version above this one's, in WAL mode (which a run switches)."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION + 1),))
    db.execute("CREATE TABLE runs2 (id INTEGER PRIMARY KEY, what TEXT)")
    db.commit()
    db.close()


def _unversioned(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, status TEXT)")
    db.commit()
    db.close()


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (_newer, f"has schema version {SCHEMA_VERSION + 1}, newer than this tunnelbench"),
        (_unversioned, "has no schema version"),
    ],
)
def test_a_database_a_run_may_not_own_is_refused_unchanged(tmp_path, make, error):
    path = tmp_path / "r.db"
    make(path)
    before = _digest(path)
    with pytest.raises(UserError, match=error):
        Store(path)
    assert _digest(path) == before
    assert not [p for s in SIDE_FILES if (p := Path(f"{path}{s}")).exists()]
    assert not Path(f"{path}-reserve").exists()


def test_a_new_database_is_created_with_its_version_and_an_empty_one_is_taken(tmp_path):
    Store(tmp_path / "new.db").close()
    db = sqlite3.connect(tmp_path / "new.db")
    assert db.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
    (tmp_path / "empty.db").touch()
    Store(tmp_path / "empty.db").close()
    assert sqlite3.connect(tmp_path / "empty.db").execute("SELECT COUNT(*) FROM runs").fetchone()


def _tunnelbench(args: list[str], cwd: Path, db: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TUNNELBENCH_DB"}
    env["PYTHONPATH"] = str(SRC)
    if db is not None:
        env["TUNNELBENCH_DB"] = db
    return subprocess.run(
        [sys.executable, "-m", "tunnelbench", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.skipif(os.geteuid() != 0, reason="run needs root")
def test_run_on_a_newer_database_exits_2_and_leaves_it_byte_for_byte(tmp_path):
    path = tmp_path / "newer.db"
    _newer(path)
    before = _digest(path)
    env = {**os.environ, "PYTHONPATH": str(SRC), "TUNNELBENCH_LOCK": str(tmp_path / "m.lock")}
    done = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "run", "--quick", "--tunnels", "none",
         "--streams", "1", "--db", str(path)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "newer than this tunnelbench understands" in done.stderr
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.lock", "newer.db"]


def test_a_loop_of_links_is_named_as_one(tmp_path):
    (tmp_path / "a.db").symlink_to(tmp_path / "b.db")
    (tmp_path / "b.db").symlink_to(tmp_path / "a.db")
    done = _tunnelbench(["runs", "--db", "a.db"], tmp_path, None)
    assert done.returncode == 2
    assert "--db: 'a.db' is a loop of symbolic links" in done.stderr
    # As the database to write: refused before SQLite tries (which said "permissions").
    with pytest.raises(UserError, match="loop of symbolic links"):
        Store(tmp_path / "a.db")


def test_errors_of_the_variable_name_the_variable(tmp_path):
    done = _tunnelbench(["runs"], tmp_path, str(tmp_path / "none.db"))
    assert (done.returncode, done.stderr.strip()) == (
        2,
        f"tunnelbench: error: $TUNNELBENCH_DB: no results database at '{tmp_path / 'none.db'}'",
    )
    given = _tunnelbench(["runs", "--db", "none.db"], tmp_path, str(tmp_path / "none.db"))
    assert "error: --db: no results database at 'none.db'" in given.stderr
