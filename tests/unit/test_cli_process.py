"""tests/cli_process.py: the forked command a unit test runs answers as a new
``python -m tunnelbench`` would, and leaves the test's process as it was."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import cli_process
from tunnelbench.cli import main as cli_main


def _fresh(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunnelbench", *args],
        cwd=cwd, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_forked_command_answers_as_a_new_interpreter_does(tmp_path: Path) -> None:
    for args in (["--version"], ["report", "--db", "absent.db"], ["run", "--streams", "0"]):
        forked, fresh = cli_process.run(args, cwd=tmp_path), _fresh(args, tmp_path)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode, fresh.stdout, fresh.stderr,
        ), args  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_the_childs_directory_environment_and_output_stay_its_own(tmp_path: Path) -> None:
    before = (os.getcwd(), dict(os.environ), sys.stdout, sys.argv)
    done = cli_process.run(["-v", "--version"], cwd=tmp_path, env={"COLUMNS": "33"})
    assert done.returncode == 0 and done.stdout.startswith("tunnelbench ")
    assert (os.getcwd(), dict(os.environ), sys.stdout, sys.argv) == before


def test_a_bug_in_the_child_is_its_exit_code_and_its_message(monkeypatch, tmp_path: Path) -> None:
    def broken(args: object) -> int:
        raise RuntimeError("planted")

    monkeypatch.setattr(cli_main, "_call", lambda args: broken(args))
    done = cli_process.run(["--version"], cwd=tmp_path)
    assert done.returncode == 0  # --version answers before any verb runs
    done = cli_process.run(["runs", "--db", "x.db"], cwd=tmp_path)
    assert done.returncode == 1
    assert "RuntimeError: planted" in done.stderr


def test_a_variable_read_at_import_gets_a_new_interpreter(tmp_path: Path) -> None:
    state = tmp_path / "labs"
    (state / "only-here").mkdir(parents=True)
    (state / "only-here" / "state.json").write_text("{")
    env = {**os.environ, "TUNNELBENCH_STATE_DIR": str(state)}
    done = cli_process.run(["lab", "status", "--json"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert [lab["id"] for lab in json.loads(done.stdout)] == ["only-here"]
