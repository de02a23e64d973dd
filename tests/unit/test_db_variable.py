"""``TUNNELBENCH_DB``: the results database of every verb that takes ``--db``, where
``--db`` is not given; ``--db`` wins, and an empty value is no value. Each case runs the
real command in a fresh process with that environment, as a user would."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import cli_process
from tests.conftest import FIXTURES

SRC = Path(__file__).resolve().parents[2] / "src"
#: Every verb with --db (sub-verbs included).
DB_VERBS = (["run"], ["tune"], ["report"], ["runs"], ["compare"])


def tunnelbench(args: list[str], cwd: Path, db: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TUNNELBENCH_DB"}
    env["PYTHONPATH"] = str(SRC)  # this tree's code, whatever the working directory
    if db is not None:
        env["TUNNELBENCH_DB"] = db
    return cli_process.run(args, cwd=cwd, env=env, timeout=60)


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A recorded database, copied where no --db default would find it."""
    path = tmp_path / "elsewhere" / "results.db"
    path.parent.mkdir()
    shutil.copy(FIXTURES / "runs" / "queue-comparison.db", path)
    return path


def test_the_variable_names_the_database_of_runs_and_report(tmp_path: Path, stored: Path) -> None:
    listed = tunnelbench(["runs"], tmp_path, str(stored))
    assert listed.returncode == 0, listed.stderr
    assert "queue-comparison" in listed.stdout
    shown = tunnelbench(["report", "latest", "--format", "json"], tmp_path, str(stored))
    assert shown.returncode == 0, shown.stderr
    assert '"queue-comparison"' in shown.stdout


def test_the_variable_names_the_database_of_compare(tmp_path: Path, stored: Path) -> None:
    done = tunnelbench(
        ["compare", "1@tunnel.kind=none", "1@tunnel.kind=wireguard"], tmp_path, str(stored)
    )
    assert done.returncode == 0, done.stderr
    # (The line wraps at the terminal's width: the words are what count.)
    assert " ".join(done.stdout.split()).startswith(f"A: run 1 in {stored} ")


def test_db_wins_over_the_variable(tmp_path: Path, stored: Path) -> None:
    done = tunnelbench(["runs", "--db", str(tmp_path / "other.db")], tmp_path, str(stored))
    assert done.returncode == 2
    missing = tmp_path / "other.db"
    assert done.stderr == f"tunnelbench: error: --db: no results database at '{missing}'\n"


@pytest.mark.parametrize("value", [None, ""])
def test_unset_or_empty_means_the_working_directory(tmp_path: Path, value: str | None) -> None:
    done = tunnelbench(["runs"], tmp_path, value)
    assert done.returncode == 2
    assert done.stderr == "tunnelbench: error: --db: no results database at 'tunnelbench.db'\n"
    shutil.copy(FIXTURES / "runs" / "queue-comparison.db", tmp_path / "tunnelbench.db")
    assert "queue-comparison" in tunnelbench(["runs"], tmp_path, value).stdout


@pytest.mark.parametrize("verb", DB_VERBS, ids=" ".join)
def test_help_says_where_the_default_comes_from(tmp_path: Path, verb: list[str]) -> None:
    unset = tunnelbench([*verb, "--help"], tmp_path, None)
    assert unset.returncode == 0, unset.stderr
    text = " ".join(unset.stdout.split())  # argparse wraps help text
    assert "(default: $TUNNELBENCH_DB or ./tunnelbench.db)" in text
    set_ = " ".join(tunnelbench([*verb, "--help"], tmp_path, "/srv/tb.db").stdout.split())
    assert "(default: $TUNNELBENCH_DB or ./tunnelbench.db; here '/srv/tb.db')" in set_
