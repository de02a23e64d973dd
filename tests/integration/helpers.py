"""Running the real command, as a user would, from tests: in a process of its own,
forked with tunnelbench imported (tests/cli_process.py); the tests that stop, signal or
race commands start a new ``python -m tunnelbench`` themselves."""

import subprocess
from pathlib import Path
from typing import Any

from tests import cli_process
from tunnelbench.bench.store import Store
from tunnelbench.model.remotefacts import RemoteFacts
from tunnelbench.report import view


def tunnelbench(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return cli_process.run(args, cwd=cwd, timeout=timeout)


def run_plan(work: Path, plan: str, timeout: float = 300) -> view.RunView:
    """Run ``plan`` (a plan file's text) in ``work`` as a user would, and load what it
    stored: its trials, summaries and verdicts."""
    (work / "plan.toml").write_text(plan)
    done = tunnelbench(
        "run", "plan.toml", "--db", "r.db", "-q", "--no-reports", cwd=work, timeout=timeout
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # --no-reports: the run is stored, and nothing else is written beside it.
    assert not [p for p in work.iterdir() if p.suffix in (".html", ".md", ".png")]
    assert "reports:" not in done.stdout
    return latest(work / "r.db")


def latest(db: Path) -> view.RunView:
    """The newest run stored in ``db``: its trials, summaries and verdicts."""
    store = Store.read(db)
    try:
        return view.load(store, "latest")
    finally:
        store.close()


def remote(trial: Any) -> RemoteFacts:
    """A remote trial's record of the hosts (every remote trial has one)."""
    found = trial.resolved.remote
    assert isinstance(found, RemoteFacts), found
    return found
