"""SQLite storage of runs, trials, metrics, probe samples and raw generator output.

The only module that writes results. Each finished trial is committed on its own, so a
crash or Ctrl-C loses at most the trial in progress. The schema carries a version; a
database written by a newer tunnelbench is refused rather than misread.

Two ways in: ``Store(path)`` for a run, which creates or upgrades the database, and
:meth:`Store.read` for the reading verbs, which opens it read-only (``mode=ro``) and
never upgrades it, so that a user can read a database root wrote. A storage fault while
writing or reading (disk full, a read-only file or mount, an immutable file, an I/O
error) is a :class:`StorageError` that says which.

Nothing of the database is memory-mapped, so a file that cannot be written is an error
from SQLite, never a SIGBUS: memory-mapped I/O is off (``mmap_size = 0``), and the
journal is a rollback journal (``journal_mode = DELETE``), not a write-ahead log, whose
index SQLite always maps from the ``-shm`` file (a run was killed by SIGBUS at its next
write once that file turned immutable, leaving its lab behind). Readers still read while
a run writes: each commit holds the database for milliseconds, within ``busy_timeout``.
"""

import array
import contextlib
import errno
import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tunnelbench.analysis.precision import Precision
from tunnelbench.bench.backfill import backfill
from tunnelbench.echo import capped, shown
from tunnelbench.errors import StorageError, UserError
from tunnelbench.model.environment import Environment
from tunnelbench.model.lockrecord import Measurer
from tunnelbench.model.metrics import WARMUP_S
from tunnelbench.model.plan import Experiment, TrialConfig
from tunnelbench.model.records import (
    GUESTS,
    Resolved,
    RunRecord,
    RunStatus,
    TimedTrial,
    TrialRecord,
    TrialStatus,
)
from tunnelbench.model.tuning import TuneRecord
from tunnelbench.system import ownership

SCHEMA_VERSION = 6
SQLITE_MAGIC = b"SQLite format 3\x00"
SIDE_FILES = ("-wal", "-shm", "-journal")
# Room kept beside a database being written, freed to record a run's end on a full disk.
RESERVE_SUFFIX = "-reserve"
RESERVE_BYTES = 256 * 1024
DEFAULT_DB = Path("tunnelbench.db")
#: The environment variable that names the results database where ``--db`` is not given.
DB_VARIABLE = "TUNNELBENCH_DB"


#: How errors name the database's path: the option, or the variable it came from.
_source = "--db"


def database_from_variable(yes: bool) -> None:
    """Say where the database's path came from: ``--db`` (the default), or
    ``$TUNNELBENCH_DB`` when ``--db`` was not given (the command line calls this once it
    is parsed), so that an error names what the user set."""
    global _source
    _source = f"${DB_VARIABLE}" if yes else "--db"


def db_source() -> str:
    """``--db`` or ``$TUNNELBENCH_DB``: what named the database (for messages)."""
    return _source


def default_db() -> Path:
    """The database every verb uses without ``--db``: ``$TUNNELBENCH_DB`` when it is set
    and not empty, else :data:`DEFAULT_DB` (in the working directory). Read when the
    command line's parser is built, so ``--help`` shows it and ``--db`` wins."""
    return Path(os.environ.get(DB_VARIABLE) or DEFAULT_DB)


SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    started_at REAL NOT NULL,
    ended_at REAL,
    status TEXT NOT NULL,            -- running | complete | failed | interrupted
    command_line TEXT NOT NULL,
    experiment TEXT NOT NULL,        -- JSON: configurations, repetitions, order and seed
    environment TEXT NOT NULL,       -- JSON: kernel, CPU, versions
    owner TEXT,                      -- JSON: pid and start time of the process running it
    precision TEXT,                  -- JSON, adaptive runs: config key -> standing vs target
    error TEXT,                      -- why a run stopped early (a storage fault, say)
    tune TEXT,                       -- JSON, tuning sessions: model.tuning.TuneRecord
    label TEXT,                      -- the user's short name for the run (run --label)
    notes TEXT                       -- the user's notes on it (run --notes)
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    repetition INTEGER NOT NULL,
    config_key TEXT NOT NULL,        -- canonical JSON of the requested configuration
    config TEXT NOT NULL,            -- JSON: requested configuration
    resolved TEXT NOT NULL,          -- JSON: what "auto" became, versions, lab id, MTUs
    status TEXT NOT NULL,            -- ok | failed | skipped
    error TEXT,                      -- why it failed, or why this machine skipped it
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    UNIQUE (run_id, seq)
);
CREATE TABLE IF NOT EXISTS metrics (
    trial_id INTEGER NOT NULL REFERENCES trials(id),
    name TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (trial_id, name)
);
CREATE TABLE IF NOT EXISTS artifacts (
    trial_id INTEGER NOT NULL REFERENCES trials(id),
    name TEXT NOT NULL,              -- iperf3 | probes | intervals
    content TEXT NOT NULL,           -- JSON
    PRIMARY KEY (trial_id, name)
);
CREATE INDEX IF NOT EXISTS trials_by_run ON trials(run_id, config_key);
"""
# The columns of ``runs`` in the order RunRecord reads them; a database of an older
# schema, read without upgrading it, lacks the later ones (read as NULL).
RUN_COLUMNS = (
    "id", "started_at", "ended_at", "status", "command_line", "experiment", "environment",
    "owner", "precision", "error", "tune", "label", "notes",
)  # fmt: skip


def _run_record(row: Any) -> RunRecord:
    return RunRecord(
        id=row[0], started_at=row[1], ended_at=row[2], status=RunStatus(row[3]),
        command_line=row[4],
        experiment=Experiment.from_dict(json.loads(row[5])),
        environment=Environment.from_dict(json.loads(row[6])),
        owner=json.loads(row[7]) if row[7] else None,
        precision=json.loads(row[8]) if row[8] else None,
        error=row[9],
        tune=TuneRecord.from_dict(json.loads(row[10])) if row[10] else None,
        label=row[11], notes=row[12],
    )  # fmt: skip


#: linux/fs.h: read a file's attributes (what ``lsattr`` shows); the immutable one.
FS_IOC_GETFLAGS, FS_IMMUTABLE_FL = 0x80086601, 0x10
UNWRITABLE = (
    "it cannot be written (a read-only file, an immutable file (`lsattr`) or a read-only mount)"
)


def fault(path: Path, exc: sqlite3.Error) -> str:
    """What a SQLite error means for the user, naming the database."""
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_FULL":
        what = "the disk holding it is full"
    elif name.startswith("SQLITE_READONLY") or name == "SQLITE_PERM":
        what = UNWRITABLE
    elif name.startswith(("SQLITE_IOERR", "SQLITE_CANTOPEN")) and (why := _unwritable(path)):
        # SQLite does not say why a write failed; the file or its directory does.
        what = f"it cannot be written ({why})"
    elif name.startswith("SQLITE_IOERR"):
        what = f"an I/O error ({exc}; {name})"
    elif name.startswith("SQLITE_CANTOPEN"):
        what = "it cannot be opened (permissions of the file or its directory?)"
    elif name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED"):
        what = "another process holds it locked"
    elif name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB":
        what = f"it is damaged or not a database ({exc})"
    else:
        what = f"{exc}" + (f" ({name})" if name else "")
    return f"results database {str(path)!r}: {what}"


def _unwritable(path: Path) -> str | None:
    """Why the database, a side file of it, or its directory refuses writes (an
    immutable file, a read-only mount or file), or None; asked of the system after
    SQLite failed to write, creating nothing."""
    for target in (path, *(Path(f"{path}{suffix}") for suffix in SIDE_FILES), path.parent):
        try:
            if os.statvfs(target).f_flag & os.ST_RDONLY:
                return f"{str(target)!r} is on a read-only mount"
            if _immutable(target):
                return f"{str(target)!r} is immutable (`lsattr`)"
            if not os.access(target, os.W_OK):
                return f"{str(target)!r} is read-only"
        except OSError:  # a side file that is not there
            continue
    return None


def _immutable(target: Path) -> bool:
    """Whether ``target`` has the immutable attribute (``chattr +i``), which refuses
    writes even to root; False where the file system keeps no such flags."""
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
    except OSError:
        return False
    finally:
        os.close(fd)
    return bool(flags[0] & FS_IMMUTABLE_FL)


def _connect_read_only(uri: str, path: Path) -> sqlite3.Connection:
    """A read-only connection that creates no file.

    A database with a rollback journal (what :class:`Store` writes) is read with SQLite's
    locks, beside a run that writes it. If a ``-journal`` is left (a write that failed,
    or a writer that was killed mid-commit), a reader cannot roll it back: the database
    file is then read as it stands (``immutable``), as it was before that write when the
    write failed; a run's next open rolls the journal back.

    A database still in WAL mode (an older tunnelbench's, or a recorded fixture) is read
    through its ``-shm`` file, which SQLite creates beside it (a user may not, next to a
    database root wrote; and it would be left behind). Without a ``-wal`` file every
    committed transaction is in the database file itself: it is read as immutable,
    creating nothing. With one (a run is writing, or one was killed), it is read through
    them.
    """
    immutable = f"{uri}&immutable=1"
    if _in_wal_mode(path):
        live = Path(f"{path}-wal").exists()
        return sqlite3.connect(uri if live else immutable, uri=True, isolation_level=None)
    if Path(f"{path}-journal").exists():
        return sqlite3.connect(immutable, uri=True, isolation_level=None)
    return sqlite3.connect(uri, uri=True, isolation_level=None)


def _in_wal_mode(path: Path) -> bool:
    """Whether the database file's header says WAL (its read and write versions, bytes
    18 and 19, are 2); a file that cannot be read is left to SQLite to report."""
    try:
        with path.open("rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header[18:20] == b"\x02\x02"


def _check_path(path: Path, *, must_exist: bool) -> bool:
    """Refuse a path that cannot be a results database, before SQLite touches it (and
    creates a file); return whether the file exists. A :class:`UserError` names it."""
    name = capped(repr(str(path)), 300)
    try:
        os.stat(path)
    except OSError as exc:
        # pathlib's checks below read a loop of symbolic links as "not there"; SQLite
        # then fails to open it, which read as a permissions problem.
        if exc.errno == errno.ELOOP:
            raise UserError(
                f"{_source}: {name} is a loop of symbolic links (or too many links deep);"
                " name the database file itself"
            ) from None
    try:
        is_dir, exists, is_file = path.is_dir(), path.exists(), path.is_file()
        parent_ok = path.parent.is_dir()
    except OSError as exc:  # e.g. a name longer than the file system allows
        if must_exist:
            raise UserError(f"{_source}: no results database at {name}") from None
        raise UserError(f"{_source}: {name}: {exc.strerror}") from None
    if is_dir:
        raise UserError(f"{_source}: {name} is a directory; give a database file")
    if not exists:
        if must_exist:
            raise UserError(f"{_source}: no results database at {name}")
        if not parent_ok:
            parent = capped(repr(str(path.parent)), 300)
            raise UserError(f"{_source}: directory {parent} does not exist")
        return False
    if not is_file:
        raise UserError(f"{_source}: {name} is not a regular file")
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise UserError(f"{_source}: cannot read {name}: {exc.strerror}") from None
    if head and head != SQLITE_MAGIC:
        raise UserError(f"{_source}: {name} is not a tunnelbench results database")
    return True


def _refuse_unowned(path: Path) -> None:
    """Refuse an existing database a run may not write to, reading it through a
    read-only connection that changes nothing and creates no file (as the reading verbs
    do): another program's, one without a schema version, one of a newer schema. An
    empty database (no table yet) is a new one."""
    uri = f"file:{quote(str(path.absolute()))}?mode=ro"
    try:
        db = _connect_read_only(uri, path)
    except sqlite3.Error as exc:
        raise StorageError(fault(path, exc)) from None
    try:
        db.execute("PRAGMA busy_timeout = 5000")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        if not tables:
            return
        if "meta" not in tables:
            raise UserError(f"{_source}: {str(path)!r} is not a tunnelbench results database")
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.Error as exc:
        raise StorageError(fault(path, exc)) from None
    finally:
        db.close()
    if row is None:
        raise UserError(
            f"{_source}: {str(path)!r} has no schema version: not a database this"
            " tunnelbench wrote (or one cut short); give another file"
        )
    _check_version_value(path, row[0])


def _check_version_value(path: Path, value: object) -> int:
    """The stored schema version as a number; a newer (or unreadable) one is refused."""
    if not str(value).isdecimal() or int(str(value)) > SCHEMA_VERSION:
        raise UserError(
            f"{_source}: {str(path)!r} has schema version {value}, newer than this "
            f"tunnelbench understands ({SCHEMA_VERSION})"
        )
    return int(str(value))


class Store:
    def __init__(self, path: Path) -> None:
        """Open (creating or upgrading it) the database a run writes to.

        A path that cannot hold one is a :class:`UserError` (exit 2) and creates
        nothing; a database that cannot be written is a :class:`StorageError`.
        """
        self.path = path
        self.read_only = False
        existed = _check_path(path, must_exist=False)
        if existed:
            # Before anything writes to it: a database this version cannot own (a newer
            # schema, no version at all, another program's) is refused unchanged.
            _refuse_unowned(path)
        # Side files no one had open: ours to remove if this open fails.
        side = [Path(f"{path}{suffix}") for suffix in SIDE_FILES]
        new_side = [f for f in side if not f.exists()]
        try:
            self.db = sqlite3.connect(path, isolation_level=None)
        except sqlite3.Error as exc:
            raise StorageError(fault(path, exc)) from None
        try:
            self._configure()
            self._refuse_foreign()
            self._use_rollback_journal()
            self._migrate()
        except BaseException as exc:
            self.db.close()
            for leftover in new_side:
                with contextlib.suppress(OSError):
                    leftover.unlink()
            if isinstance(exc, sqlite3.Error):
                raise StorageError(fault(path, exc)) from None
            raise
        if not existed:
            ownership.hand_over(path)
        for suffix in SIDE_FILES:
            ownership.match_owner(Path(f"{path}{suffix}"), path)
        self._run_columns: tuple[str, ...] = RUN_COLUMNS
        self._reserve: Path | None = None
        self._make_reserve()

    def _make_reserve(self) -> None:
        """Set aside :data:`RESERVE_BYTES` of the database's disk in a file beside it,
        released when the disk fills up, so that a run can still be marked as stopped
        by it. A disk without even that much room is refused before anything runs."""
        reserve = Path(f"{self.path}{RESERVE_SUFFIX}")
        try:
            fd = os.open(reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError as exc:
            self.db.close()
            with contextlib.suppress(OSError):
                reserve.unlink()
            raise StorageError(
                f"results database {str(self.path)!r}: cannot set aside "
                f"{RESERVE_BYTES // 1024} KiB beside it ({exc.strerror})"
            ) from None
        self._reserve = reserve

    def _release_reserve(self) -> None:
        if self._reserve is not None:
            with contextlib.suppress(OSError):
                self._reserve.unlink()
            self._reserve = None

    @classmethod
    def read(cls, path: Path) -> "Store":
        """Open an existing database to read it: read-only, never upgraded, so a user
        may read what root stored. An older schema is read as it is."""
        _check_path(path, must_exist=True)
        store = cls.__new__(cls)
        store.path, store.read_only = path, True
        uri = f"file:{quote(str(path.absolute()))}?mode=ro"
        try:
            store.db = _connect_read_only(uri, path)
        except sqlite3.Error as exc:
            raise UserError(f"{_source}: cannot read {fault(path, exc)}") from None
        try:
            store._configure()
            store._check_version(store.db)
            columns = {r[1] for r in store.db.execute("PRAGMA table_info(runs)")}
        except sqlite3.Error as exc:
            store.db.close()
            raise UserError(f"{_source}: cannot read {fault(path, exc)}") from None
        except BaseException:
            store.db.close()
            raise
        store._run_columns = tuple(c if c in columns else "NULL" for c in RUN_COLUMNS)
        return store

    @classmethod
    def open_existing(cls, path: Path) -> "Store":
        """An existing database, to write to (``--resume``)."""
        _check_path(path, must_exist=True)
        return cls(path)

    def close(self) -> None:
        self.db.close()
        if not self.read_only:
            self._release_reserve()

    def _configure(self) -> None:
        self.db.execute("PRAGMA mmap_size = 0")  # I/O errors, not SIGBUS, on a full disk
        self.db.execute("PRAGMA busy_timeout = 5000")
        if not self.read_only:
            self.db.execute("PRAGMA foreign_keys = ON")

    def _use_rollback_journal(self) -> None:
        """``journal_mode = DELETE``: no ``-shm`` to map (a database an older tunnelbench
        left in WAL mode is converted; that needs no other process to have it open)."""
        row = self.db.execute("PRAGMA journal_mode = DELETE").fetchone()
        if row is None or str(row[0]).lower() != "delete":
            raise StorageError(
                f"results database {str(self.path)!r}: another process holds it open in"
                " WAL mode (an older tunnelbench's run?); try again when it has finished"
            )

    def _refuse_foreign(self) -> None:
        """Never add tunnelbench's tables to another program's database."""
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
        if tables and "meta" not in tables:
            raise UserError(f"{_source}: {str(self.path)!r} is not a tunnelbench results database")

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read, its SQLite error (an I/O error, a file gone bad under a run) turned
        into a :class:`StorageError` naming the database and the cause."""
        try:
            yield self.db
        except sqlite3.Error as exc:
            raise StorageError(fault(self.path, exc)) from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self.db.in_transaction:
                # The fault below is what the user must hear about.
                with contextlib.suppress(sqlite3.Error):
                    self.db.execute("ROLLBACK")
            raise StorageError(fault(self.path, exc)) from None

    def _check_version(self, db: sqlite3.Connection) -> int | None:
        """The stored schema version (None for a new database); a newer one is refused."""
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:
            if self.read_only:
                raise UserError(
                    f"{_source}: {str(self.path)!r} is not a tunnelbench results database"
                ) from None
            raise
        if row is None:
            if self.read_only:
                raise UserError(f"{_source}: {str(self.path)!r} has no schema version")
            return None
        return _check_version_value(self.path, row[0])

    def _migrate(self) -> None:
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
        version = self._check_version(self.db) if "meta" in tables else None
        # Every statement is CREATE ... IF NOT EXISTS: safe to repeat. A new database
        # gets its tables and its version in one transaction, so that no database of
        # tables without a version (which a later run refuses) is ever left.
        stamp = (
            f"INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');"
            if version is None
            else ""
        )
        self.db.executescript(f"BEGIN IMMEDIATE; {SCHEMA} {stamp} COMMIT;")
        if version is None:
            return
        with self._transaction() as db:
            version = self._check_version(db)
            assert version is not None  # stamped above or before
            # Columns are added in version order, so every database has them in the
            # order of SCHEMA.
            columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
            if version < 2 and "owner" not in columns:
                db.execute("ALTER TABLE runs ADD COLUMN owner TEXT")
            if version < 3 and "precision" not in columns:
                db.execute("ALTER TABLE runs ADD COLUMN precision TEXT")
            if version < 4 and "error" not in columns:
                db.execute("ALTER TABLE runs ADD COLUMN error TEXT")
            if version < 5 and "tune" not in columns:
                db.execute("ALTER TABLE runs ADD COLUMN tune TEXT")
            if version < 6 and "label" not in columns:
                db.execute("ALTER TABLE runs ADD COLUMN label TEXT")
                db.execute("ALTER TABLE runs ADD COLUMN notes TEXT")
            # Written even when unchanged: a database that cannot be written (an
            # immutable file, which SQLite silently opens read-only) fails here, before
            # anything runs.
            db.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )

    # --- writing ---

    def start_run(
        self,
        command_line: str,
        experiment: Experiment,
        env: Environment,
        owner: dict[str, int] | None = None,
    ) -> int:
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO runs (started_at, status, command_line, experiment, environment,"
                " owner) VALUES (?, 'running', ?, ?, ?, ?)",
                (
                    time.time(),
                    command_line,
                    json.dumps(experiment.to_dict()),
                    json.dumps(env.to_dict()),
                    json.dumps(owner),
                ),
            )
            return int(cursor.lastrowid or 0)

    def reopen_run(self, run_id: int, owner: dict[str, int]) -> None:
        """Mark a stopped run as running again, by a new owner, to resume it."""
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET status = 'running', ended_at = NULL, owner = ? WHERE id = ?",
                (json.dumps(owner), run_id),
            )

    def finish_run(self, run_id: int, status: RunStatus, error: str | None = None) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET ended_at = ?, status = ?, error = ? WHERE id = ?",
                (time.time(), status, error, run_id),
            )

    def abandon_run(self, run_id: int, exc: StorageError) -> StorageError:
        """After a storage fault in a run: mark it failed with the fault as its reason
        if the database still takes that, and return the error to show the user: what
        went wrong, what is kept, and what to do."""
        try:
            kept = self.trial_counts(run_id)
            stored = f"{sum(kept.values())} finished trial(s) are stored"
        except StorageError:
            stored = "the trials finished before it are stored"
        self._release_reserve()  # room to record the end of the run
        try:
            self.finish_run(run_id, RunStatus.FAILED, str(exc))
            marked = f"run {run_id} is marked failed"
        except StorageError:
            marked = f"run {run_id} could not be marked failed and still reads 'running'"
        return StorageError(
            f"{exc}. {stored}; {marked}. Free space or make it writable, then "
            f"`tunnelbench run --resume {run_id} --db {self.path}` runs the rest"
        )

    def set_precision(self, run_id: int, precision: Mapping[str, Precision]) -> None:
        """Record where each configuration of an adaptive run stands against its target
        (by its configuration's key)."""
        stored = json.dumps({key: p.to_dict() for key, p in precision.items()})
        with self._transaction() as db:
            db.execute("UPDATE runs SET precision = ? WHERE id = ?", (stored, run_id))

    def set_label(self, run_id: int, label: str | None, notes: str | None) -> None:
        """Name a run and note what it was for (None leaves that one as it is)."""
        with self._transaction() as db:
            if label is not None:
                db.execute("UPDATE runs SET label = ? WHERE id = ?", (label, run_id))
            if notes is not None:
                db.execute("UPDATE runs SET notes = ? WHERE id = ?", (notes, run_id))

    def add_guest_environment(self, run_id: int, kernel: str, facts: Environment) -> None:
        """Record the environment of a VM guest the run's trials on ``kernel`` (the
        ``lab.kernel`` value) ran in, under the run's environment's ``guests``."""
        with self._transaction() as db:
            row = db.execute("SELECT environment FROM runs WHERE id = ?", (run_id,)).fetchone()
            environment = json.loads(row[0]) if row and row[0] else {}
            environment.setdefault(GUESTS, {})[kernel] = facts.to_dict()
            db.execute(
                "UPDATE runs SET environment = ? WHERE id = ?", (json.dumps(environment), run_id)
            )

    def add_concurrent(self, owner: dict[str, int], others: tuple[Measurer, ...]) -> None:
        """Record under ``measurement_lock.beside`` of the environment of each run this
        ``owner`` (a process) started or resumed which measurements ran beside it
        (:meth:`tunnelbench.bench.measurement_lock.MeasurementLock.beside`)."""
        with self._transaction() as db:
            rows = db.execute(
                "SELECT id, environment FROM runs WHERE owner = ?", (json.dumps(owner),)
            ).fetchall()
            for run_id, text in rows:
                environment = Environment.from_dict(json.loads(text) if text else {})
                # A run started without the lock's record (none today) records none.
                if (lock := environment.measurement_lock) is None:
                    continue
                environment = environment.with_keys(measurement_lock=lock.with_beside(others))
                db.execute(
                    "UPDATE runs SET environment = ? WHERE id = ?",
                    (json.dumps(environment.to_dict()), run_id),
                )

    def set_tune(self, run_id: int, record: TuneRecord) -> None:
        """Record where a tuning session stands (its path so far and how it ended)."""
        stored = json.dumps(record.to_dict())
        with self._transaction() as db:
            db.execute("UPDATE runs SET tune = ? WHERE id = ?", (stored, run_id))

    def add_trial(
        self,
        run_id: int,
        *,
        seq: int,
        repetition: int,
        config_key: str,
        config: TrialConfig,
        resolved: Resolved,
        status: TrialStatus,
        error: str | None,
        started_at: float,
        metrics: dict[str, float],
        artifacts: dict[str, Any],
    ) -> int:
        """Store one finished trial with everything measured, in one transaction."""
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO trials (run_id, seq, repetition, config_key, config, resolved,"
                " status, error, started_at, ended_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    seq,
                    repetition,
                    config_key,
                    json.dumps(config.to_dict()),
                    json.dumps(resolved.to_dict()),
                    status.value,
                    error,
                    started_at,
                    time.time(),
                ),
            )
            trial_id = int(cursor.lastrowid or 0)
            db.executemany(
                "INSERT INTO metrics VALUES (?, ?, ?)",
                [(trial_id, name, float(value)) for name, value in metrics.items()],
            )
            db.executemany(
                "INSERT INTO artifacts VALUES (?, ?, ?)",
                [(trial_id, name, json.dumps(content)) for name, content in artifacts.items()],
            )
            return trial_id

    # --- reading ---

    def run(self, ref: str) -> RunRecord:
        """A run by id, or ``latest``."""
        if ref == "latest":
            with self._reading() as db:
                row = db.execute(
                    f"SELECT {self._columns()} FROM runs ORDER BY id DESC LIMIT 1"
                ).fetchone()
            if row is None:
                raise UserError(f"no runs stored in {str(self.path)!r} yet")
        else:
            if not (ref.isascii() and ref.isdigit()):  # not '²', which isdigit() accepts
                raise UserError(f"run: {shown(ref)} is not a run id or 'latest'")
            row = None
            if len(ref.lstrip("0")) <= 18:  # an id is an SQLite integer: at most 63 bits
                with self._reading() as db:
                    row = db.execute(
                        f"SELECT {self._columns()} FROM runs WHERE id = ?", (int(ref),)
                    ).fetchone()
            if row is None:
                raise UserError(f"run: no run {capped(ref)} in {str(self.path)!r}")
        return _run_record(row)

    def runs(self) -> list[RunRecord]:
        """Every stored run, oldest first."""
        with self._reading() as db:
            rows = db.execute(f"SELECT {self._columns()} FROM runs ORDER BY id").fetchall()
        return [_run_record(row) for row in rows]

    def _columns(self) -> str:
        return ", ".join(self._run_columns)

    def trial_counts(self, run_id: int) -> dict[str, int]:
        """Stored trials of a run by status."""
        with self._reading() as db:
            rows = db.execute(
                "SELECT status, COUNT(*) FROM trials WHERE run_id = ? GROUP BY status",
                (run_id,),
            ).fetchall()
        return {status: count for status, count in rows}

    def trials(self, run_id: int) -> list[TrialRecord]:
        with self._reading() as db:
            rows = db.execute(
                "SELECT id, run_id, seq, repetition, config_key, config, resolved, status,"
                " error FROM trials WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
            metrics: dict[int, dict[str, float]] = {row[0]: {} for row in rows}
            with closing(
                db.execute(
                    "SELECT m.trial_id, m.name, m.value FROM metrics m JOIN trials t"
                    " ON t.id = m.trial_id WHERE t.run_id = ?",
                    (run_id,),
                )
            ) as cursor:
                for trial_id, name, value in cursor:
                    metrics[trial_id][name] = value
        records = []
        for r in rows:
            config = TrialConfig.from_dict(json.loads(r[5]))
            records.append(
                TrialRecord(
                    id=r[0],
                    run_id=r[1],
                    seq=r[2],
                    repetition=r[3],
                    # Recomputed, not r[4]: a configuration stored before a setting existed
                    # takes its default, and must match today's equal configuration.
                    config_key=config.key(),
                    config=config,
                    resolved=backfill(config, Resolved.from_dict(json.loads(r[6]))),
                    status=TrialStatus(r[7]),
                    error=r[8],
                    metrics=metrics[r[0]],
                )
            )
        return records

    def timed_trials(self, limit: int) -> list[TimedTrial]:
        """The newest ``limit`` trials that finished (ok), newest first, with their
        wall-clock span and what their traffic took."""
        with self._reading() as db:
            rows = db.execute(
                "SELECT t.run_id, t.seq, t.config, t.resolved, t.started_at, t.ended_at,"
                " (SELECT value FROM metrics m WHERE m.trial_id = t.id AND m.name = ?)"
                " FROM trials t WHERE t.status = 'ok' ORDER BY t.id DESC LIMIT ?",
                (WARMUP_S.name, limit),
            ).fetchall()
        timed = []
        for run_id, seq, config, resolved, started_at, ended_at, warmup_s in rows:
            settings = TrialConfig.from_dict(json.loads(config))
            facts = Resolved.from_dict(json.loads(resolved))
            traffic = settings.traffic
            timed.append(
                TimedTrial(
                    run_id=run_id,
                    seq=seq,
                    started_at=started_at,
                    seconds=ended_at - started_at,
                    duration=traffic.duration,
                    warmup_s=warmup_s,
                    expected_warmup=settings.expected_warmup,
                    in_vm=settings.lab.in_vm,
                    lab_fresh=facts.lab.fresh,
                    tunnel=settings.tunnel if facts.remote is not None else None,
                )
            )
        return timed

    def artifact(self, trial_id: int, name: str) -> Any:
        with self._reading() as db:
            row = db.execute(
                "SELECT content FROM artifacts WHERE trial_id = ? AND name = ?", (trial_id, name)
            ).fetchone()
        return None if row is None else json.loads(row[0])
