"""SQLite storage of runs, trials, metrics, probe samples and raw generator output.

The only module that writes results. Each finished trial is committed on its own, so a
crash or Ctrl-C loses at most the trial in progress. The schema carries a version; a
database written by a newer tunnelbench is refused rather than misread.
"""

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunnelbench.echo import capped, shown
from tunnelbench.errors import UserError
from tunnelbench.plan import TrialConfig

SCHEMA_VERSION = 3
DEFAULT_DB = Path("tunnelbench.db")

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
    precision TEXT                   -- JSON, adaptive runs: config key -> standing vs target
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


@dataclass
class TrialRecord:
    id: int
    run_id: int
    seq: int
    repetition: int
    config_key: str
    config: dict[str, Any]
    resolved: dict[str, Any]
    status: str
    error: str | None
    metrics: dict[str, float]


@dataclass
class RunRecord:
    id: int
    started_at: float
    ended_at: float | None
    status: str
    command_line: str
    experiment: dict[str, Any]
    environment: dict[str, Any]
    owner: dict[str, int] | None = None
    # Adaptive runs: config key -> analysis.precision.Precision.to_dict(), as last decided.
    precision: dict[str, dict[str, Any]] | None = None


def _run_record(row: Any) -> RunRecord:
    return RunRecord(
        id=row[0], started_at=row[1], ended_at=row[2], status=row[3], command_line=row[4],
        experiment=json.loads(row[5]), environment=json.loads(row[6]),
        owner=json.loads(row[7]) if row[7] else None,
        precision=json.loads(row[8]) if row[8] else None,
    )  # fmt: skip


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA foreign_keys = ON")
        self.db.execute("PRAGMA journal_mode = WAL")
        self._migrate()

    @classmethod
    def open_existing(cls, path: Path) -> "Store":
        try:
            found = path.is_file()
        except OSError:  # e.g. a name longer than the file system allows
            found = False
        if not found:
            raise UserError(f"--db: no results database at {capped(repr(str(path)), 300)}")
        return cls(path)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _migrate(self) -> None:
        # Every statement is CREATE ... IF NOT EXISTS: safe to repeat, and executescript
        # cannot run inside an explicit transaction.
        self.db.executescript(SCHEMA)
        with self._transaction() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                return
            version = int(row[0])
            if version > SCHEMA_VERSION:
                raise UserError(
                    f"--db: {str(self.path)!r} has schema version {row[0]}, newer than this "
                    f"tunnelbench understands ({SCHEMA_VERSION})"
                )
            # Columns are added in version order, so every database has them in the
            # order of SCHEMA (``SELECT *`` reads them by position).
            columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
            if version < 2 and "owner" not in columns:
                db.execute("ALTER TABLE runs ADD COLUMN owner TEXT")
            if version < 3 and "precision" not in columns:
                db.execute("ALTER TABLE runs ADD COLUMN precision TEXT")
            db.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )

    # --- writing ---

    def start_run(
        self,
        command_line: str,
        experiment: dict[str, Any],
        env: dict[str, Any],
        owner: dict[str, int] | None = None,
    ) -> int:
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO runs (started_at, status, command_line, experiment, environment,"
                " owner) VALUES (?, 'running', ?, ?, ?, ?)",
                (
                    time.time(),
                    command_line,
                    json.dumps(experiment),
                    json.dumps(env),
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

    def finish_run(self, run_id: int, status: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET ended_at = ?, status = ? WHERE id = ?",
                (time.time(), status, run_id),
            )

    def set_precision(self, run_id: int, precision: dict[str, dict[str, Any]]) -> None:
        """Record where each configuration of an adaptive run stands against its target."""
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET precision = ? WHERE id = ?", (json.dumps(precision), run_id)
            )

    def add_trial(
        self,
        run_id: int,
        *,
        seq: int,
        repetition: int,
        config_key: str,
        config: dict[str, Any],
        resolved: dict[str, Any],
        status: str,
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
                    json.dumps(config),
                    json.dumps(resolved),
                    status,
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
            row = self.db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
            if row is None:
                raise UserError(f"no runs stored in {str(self.path)!r} yet")
        else:
            if not (ref.isascii() and ref.isdigit()):  # not '²', which isdigit() accepts
                raise UserError(f"run: {shown(ref)} is not a run id or 'latest'")
            row = None
            if len(ref.lstrip("0")) <= 18:  # an id is an SQLite integer: at most 63 bits
                row = self.db.execute("SELECT * FROM runs WHERE id = ?", (int(ref),)).fetchone()
            if row is None:
                raise UserError(f"run: no run {capped(ref)} in {str(self.path)!r}")
        return _run_record(row)

    def runs(self) -> list[RunRecord]:
        """Every stored run, oldest first."""
        return [_run_record(row) for row in self.db.execute("SELECT * FROM runs ORDER BY id")]

    def trial_counts(self, run_id: int) -> dict[str, int]:
        """Stored trials of a run by status."""
        rows = self.db.execute(
            "SELECT status, COUNT(*) FROM trials WHERE run_id = ? GROUP BY status", (run_id,)
        )
        return {status: count for status, count in rows}

    def trials(self, run_id: int) -> list[TrialRecord]:
        rows = self.db.execute(
            "SELECT id, run_id, seq, repetition, config_key, config, resolved, status, error"
            " FROM trials WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
        metrics: dict[int, dict[str, float]] = {row[0]: {} for row in rows}
        with closing(
            self.db.execute(
                "SELECT m.trial_id, m.name, m.value FROM metrics m JOIN trials t"
                " ON t.id = m.trial_id WHERE t.run_id = ?",
                (run_id,),
            )
        ) as cursor:
            for trial_id, name, value in cursor:
                metrics[trial_id][name] = value
        return [
            TrialRecord(
                id=r[0],
                run_id=r[1],
                seq=r[2],
                repetition=r[3],
                # Recomputed, not r[4]: a configuration stored before a setting existed
                # takes its default, and must match today's equal configuration.
                config_key=TrialConfig.from_dict(json.loads(r[5])).key(),
                config=json.loads(r[5]),
                resolved=json.loads(r[6]),
                status=r[7],
                error=r[8],
                metrics=metrics[r[0]],
            )
            for r in rows
        ]

    def artifact(self, trial_id: int, name: str) -> Any:
        row = self.db.execute(
            "SELECT content FROM artifacts WHERE trial_id = ? AND name = ?", (trial_id, name)
        ).fetchone()
        return None if row is None else json.loads(row[0])
