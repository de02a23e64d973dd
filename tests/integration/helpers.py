"""Running the real command, as a user would, from tests."""

import subprocess
import sys
from pathlib import Path
from typing import Any

from tunnelbench.bench.store import Store
from tunnelbench.model.remotefacts import RemoteFacts
from tunnelbench.report import view


def tunnelbench(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunnelbench", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


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
