"""A user without root (issue 12, C.6): reading verbs on a database root wrote, `lab
status` beside root's labs, and the files a run under sudo leaves are the user's.

Run as the real unprivileged user `nobody` through `setpriv` (these tests start as root).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.integration.helpers import tunnelbench

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def as_nobody(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NOBODY, sys.executable, "-m", "tunnelbench", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory root owns and anyone may read (pytest's tmp_path is root's only)."""
    path = Path(tempfile.mkdtemp(prefix="tunnelbench-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_a_user_reads_a_database_root_wrote_without_changing_it(shared_dir: Path):
    db = shared_dir / "queue-comparison.db"  # recorded by schema version 2: read as it is
    shutil.copy(FIXTURES / "runs" / "queue-comparison.db", db)
    before = db.read_bytes()
    for args in (
        ["runs"],
        ["report"],
        ["report", "1", "--format", "json"],
        ["compare", "1@lab.wan.queue_limit=50", "1@lab.wan.queue_limit=1000"],
    ):
        done = as_nobody(*args, "--db", str(db), cwd=shared_dir)
        assert done.returncode == 0, f"{args}: {done.stderr}"
        assert done.stderr == ""
    assert db.read_bytes() == before
    assert sorted(p.name for p in shared_dir.iterdir()) == [db.name]  # no -wal, no -shm


def test_lab_status_shows_a_user_what_it_can(shared_dir: Path):
    up = tunnelbench("lab", "up", "--name", "nroot1")
    assert up.returncode == 0, up.stderr
    try:
        status = as_nobody("lab", "status", cwd=shared_dir)
    finally:
        down = tunnelbench("lab", "down", "nroot1")
    assert down.returncode == 0, down.stdout + down.stderr
    assert status.returncode == 0, status.stderr
    assert (
        "nroot1: 3 namespaces; its state is readable by root only "
        "(`sudo tunnelbench lab status` shows its processes)"
    ) in status.stdout


def test_files_a_run_under_sudo_writes_belong_to_the_user(shared_dir: Path):
    shared_dir.chmod(0o777)
    env = os.environ | {"SUDO_UID": "65534", "SUDO_GID": "65534"}  # nobody, nogroup
    run = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "run", "--quick", "-q", "--tunnels", "none",
         "--streams", "1", "--allow-concurrent", "--db", str(shared_dir / "r.db")],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    report = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "report", "1", "--format", "md",
         "-o", str(shared_dir / "mine.md"), "--db", str(shared_dir / "r.db")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    written = [shared_dir / "r.db", shared_dir / "r-run1.html", shared_dir / "r-run1.md"]
    written += [shared_dir / "mine.md"]
    written += [shared_dir / "r-run1-summary.png", shared_dir / "mine-summary.png"]
    assert all(path.exists() for path in written)
    assert {path.name: (path.stat().st_uid, path.stat().st_gid) for path in written} == {
        path.name: (65534, 65534) for path in written
    }
    # The user can now run the reading verbs, and write to the database again.
    listed = as_nobody("runs", "--db", str(shared_dir / "r.db"), cwd=shared_dir)
    assert listed.returncode == 0, listed.stderr
