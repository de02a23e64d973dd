"""A report written to a file system that fills up: one line naming the file, exit 1 (a
fault of the machine), and nothing left cut short. The file system is a 16 KiB tmpfs
mounted in a private mount namespace (``unshare -m``), so the host sees nothing of it."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

SCRIPT = """
set -e
mount --make-rprivate /
mount -t tmpfs -o size=16k tmpfs "$1"
shift
set +e
"$@"
echo "rc=$?"
ls -A "$MOUNTED"
"""


@pytest.mark.parametrize("fmt", ["html", "md", "json"])
def test_a_report_on_a_full_file_system_fails_cleanly(fmt, tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    db = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs" / "queue-comparison.db", db)
    small = tmp_path / "small"
    small.mkdir()
    report = [sys.executable, "-m", "tunnelbench", "report", "--db", str(db)]
    report += ["--format", fmt, "-o", str(small / f"r.{fmt}")]
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", SCRIPT, "sh", str(small), *report],
        capture_output=True, text=True, timeout=120, env={**os.environ, "MOUNTED": str(small)},
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines == ["rc=1"], (done.stdout, done.stderr)  # and the mount point was empty
    assert done.stderr == (
        f"tunnelbench: error: -o: cannot write {str(small / f'r.{fmt}')!r}:"
        " No space left on device\n"
    )
    assert list(Path(small).iterdir()) == []  # the host never saw the tmpfs


def test_a_report_written_over_on_a_full_file_system_keeps_the_old_one(tmp_path):
    """A report is replaced whole or not at all: the disk fills while the new one is
    written, and the old one is still there, as it was."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    db = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs" / "queue-comparison.db", db)
    small = tmp_path / "small"
    small.mkdir()
    old = small / "r.html"
    report = [sys.executable, "-m", "tunnelbench", "report", "--db", str(db)]
    report += ["--format", "html", "-o", str(old)]
    # The old report is put on the small file system before the new one is written.
    keep = ["sh", "-c", 'printf "old report" > "$0" && exec "$@"', str(old), *report]
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", SCRIPT + 'cat "$MOUNTED/r.html"', "sh", str(small), *keep],
        capture_output=True, text=True, timeout=120, env={**os.environ, "MOUNTED": str(small)},
    )  # fmt: skip
    assert done.stdout.splitlines() == ["rc=1", "r.html", "old report"], done.stderr
    assert "No space left on device" in done.stderr
