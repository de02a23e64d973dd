"""Bad input: one precise line naming the key and value, exit code 2, nothing created.

Golden cases live in tests/fixtures/golden/cli-errors.json. Each runs the real command in a
fresh process, as a user would.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests import cli_process
from tests.conftest import FIXTURES

CASES = json.loads((FIXTURES / "golden" / "cli-errors.json").read_text())


def tunnelbench(args: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess[str]:
    return cli_process.run(args, cwd=cwd, **kwargs)


def namespaces() -> set[str]:
    path = Path("/run/netns")
    return set(os.listdir(path)) if path.is_dir() else set()


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c["args"]) for c in CASES])
def test_golden_error(case, tmp_path):
    def fill(text: str) -> str:
        return text.replace("{tmp}", str(tmp_path)).replace("{fixtures}", str(FIXTURES))

    args = [fill(a) for a in case["args"]]
    before = namespaces()
    done = tunnelbench(args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "tunnelbench: error: " + fill(case["error"]) + "\n"
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no database, no report
    assert namespaces() == before


def test_unknown_option_is_an_argparse_usage_error(tmp_path):
    done = tunnelbench(["run", "--frobnicate"], cwd=tmp_path)
    assert done.returncode == 2
    assert "unrecognized arguments: --frobnicate" in done.stderr
    assert "Traceback" not in done.stderr
