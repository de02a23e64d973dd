"""A run ended by SIGKILL (or a crash) marks nothing itself: in the lab and on hosts it
stays ``running`` in the database, with its process recorded by PID and start time.
``runs`` reads it as ``killed`` once that process is gone, and as ``running`` while it is
there (the same PID with another start time is another process)."""

import json
import os
import subprocess
from pathlib import Path

import tunnelbench.cli.runs as runs_verb
import tunnelbench.report.runs as runs
from tunnelbench.bench.store import Store
from tunnelbench.lab.state import process_start_time
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, TrialConfig
from tunnelbench.model.records import RunStatus


def killed_process() -> dict[str, int]:
    """The owner record of a process that ran and was killed (SIGKILL)."""
    proc = subprocess.Popen(["sleep", "30"])
    started = process_start_time(proc.pid)
    assert started is not None
    proc.kill()
    proc.wait()
    return {"pid": proc.pid, "start_time": started}


def test_a_running_run_whose_process_is_gone_reads_killed(tmp_path: Path):
    store = Store(tmp_path / "r.db")
    try:
        plan = Experiment(configs=(TrialConfig(),), repetitions=1)
        mine = {"pid": os.getpid(), "start_time": process_start_time(os.getpid()) or 0}
        alive = store.start_run("tunnelbench run", plan, Environment(), mine)
        gone = store.start_run(
            "tunnelbench run --hosts h.toml", plan, Environment(), killed_process()
        )
        reused = store.start_run("tunnelbench run", plan, Environment(), mine | {"start_time": 1})
        done = store.start_run("tunnelbench run", plan, Environment(), killed_process())
        store.finish_run(done, RunStatus.COMPLETE)
        shown = {run.id: runs.status(run) for run in store.runs()}
        assert shown == {alive: "running", gone: "killed", reused: "killed", done: "complete"}
        listed = {
            int(line.split()[0]): line.split()[-1] for line in runs.render(store).splitlines()[2:]
        }
        assert listed == {i: shown[i] for i in shown}
        as_json = json.loads(json.dumps([runs_verb.to_json(store, r) for r in store.runs()]))
        assert {r["id"]: r["status"] for r in as_json} == shown
    finally:
        store.close()
