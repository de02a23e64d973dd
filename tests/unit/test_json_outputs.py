"""``--json`` of ``runs``, ``plan show`` and ``lab status``: plain values in the shape the
Conventions of docs/reference.md document, checked against a recorded database read by
the project's own Store, a real plan file, and a lab state file written by the project's
LabState."""

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests import cli_process
from tests.conftest import FIXTURES
from tunnelbench.bench.store import Store

SRC = Path(__file__).resolve().parents[2] / "src"


def tunnelbench(args: list[str], cwd: Path, **env: str) -> Any:
    done = cli_process.run(
        args, cwd=cwd, env={**os.environ, "PYTHONPATH": str(SRC), **env}, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(("[\n", "{\n", "[]")), "printed with indent=2"
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", ["queue-comparison", "streams-5-runs", "tune-tiny-fifo"])
def test_runs_json_is_the_store_s_runs(tmp_path: Path, name: str) -> None:
    db = tmp_path / "copy.db"
    shutil.copy(FIXTURES / "runs" / f"{name}.db", db)
    listed = tunnelbench(["runs", "--json", "--db", str(db)], tmp_path)
    store = Store.read(db)
    try:
        runs = store.runs()
        assert [r["id"] for r in listed] == [run.id for run in runs]
        for entry, run in zip(listed, runs, strict=True):
            assert set(entry) == {
                "id", "started_at", "started", "ended_at", "duration_s", "plan", "status",
                "label", "notes", "trials",
            }  # fmt: skip
            assert entry["started_at"] == run.started_at
            assert entry["ended_at"] == run.ended_at
            assert entry["status"] == run.status.value
            counts = store.trial_counts(run.id)
            assert entry["trials"]["stored"] == sum(counts.values())
            for status in ("ok", "failed", "skipped"):
                assert entry["trials"][status] == counts.get(status, 0)
            assert entry["trials"]["planned"] >= 1
    finally:
        store.close()


def test_runs_json_of_the_queue_comparison(tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    shutil.copy(FIXTURES / "runs" / "queue-comparison.db", db)
    (run,) = tunnelbench(["runs", "--json", "--db", str(db)], tmp_path)
    assert run["plan"] == "queue-comparison"
    assert run["started"] == "2026-11-21 06:01 UTC"
    assert run["status"] == "complete"
    assert run["trials"] == {"stored": 48, "planned": 48, "ok": 24, "failed": 0, "skipped": 24}
    assert run["duration_s"] == pytest.approx(run["ended_at"] - run["started_at"])


def test_plan_show_json(tmp_path: Path) -> None:
    plan = FIXTURES / "plans" / "valid" / "queues-and-excludes.toml"
    shown = tunnelbench(
        ["plan", "show", "--json", str(plan)], tmp_path, TUNNELBENCH_DB=str(tmp_path / "none.db")
    )
    assert set(shown) == {
        "name", "source", "description", "order", "seed", "axes", "excluded",
        "configurations", "baselines", "repetitions", "adaptive", "vm_boots",
        "estimated_seconds", "hosts", "overheads", "trials", "skipped", "unchecked",
    }  # fmt: skip
    assert shown["hosts"] is None  # not shown for a hosts file (plan show --hosts)
    # No database in its folder: the reference machine's figures, none learned.
    assert {v["learned_from"] for v in shown["overheads"].values()} == {None}
    assert shown["name"] == "demo"
    assert shown["source"] == str(plan)
    assert shown["axes"] == [
        {"name": "tunnel.mtu", "size": 2},
        {"name": "traffic.streams", "size": 2},
        {"name": "queue", "size": 2},
    ]
    assert (shown["excluded"], shown["configurations"], shown["baselines"]) == (2, 10, 4)
    assert shown["repetitions"] == 2 and shown["adaptive"] is None
    trials = shown["trials"]
    assert len(trials) == 20
    assert [t["seq"] for t in trials] == list(range(1, 21))
    first = trials[0]
    assert set(first) == {"seq", "repetition", "settings", "skipped", "vm"}
    assert shown["vm_boots"] == 0 and not any(t["vm"] for t in trials)
    assert first["settings"]["tunnel.kind"] == "none"
    assert first["settings"]["lab.wan.queue"] == "pfifo"
    skipped = sum(1 for t in trials if t["skipped"] is not None)
    assert sum(s["trials"] for s in shown["skipped"]) == skipped
    assert shown["estimated_seconds"]["min"] <= shown["estimated_seconds"]["max"]
    # The text says the same numbers.
    text = cli_process.run(
        ["plan", "show", str(plan)],
        env={**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "300"},
        timeout=120,
    ).stdout
    assert "= 20 trials" in text


def test_plan_show_json_of_an_adaptive_shuffled_plan(tmp_path: Path) -> None:
    plan = FIXTURES / "plans" / "valid" / "adaptive-shuffled.toml"
    shown = tunnelbench(["plan", "show", "--json", str(plan)], tmp_path)
    assert shown["order"] == "shuffled"
    assert set(shown["adaptive"]) == {"target_pct", "max_repetitions"}
    assert shown["estimated_seconds"]["max"] > shown["estimated_seconds"]["min"]


def test_lab_status_json(tmp_path: Path) -> None:
    state = tmp_path / "labs"
    assert (
        tunnelbench(["lab", "status", "--json"], tmp_path, TUNNELBENCH_STATE_DIR=str(state)) == []
    )
    recorded = {
        "lab_id": "abc123", "topology": "road-warrior",
        "namespaces": ["tb-abc123-client", "tb-abc123-gw", "tb-abc123-server"],
        "processes": [{"pid": 999999999, "start_time": 1, "argv": ["iperf3", "-s"]}],
        "info": {"tunnel": "vxlan"},
    }  # fmt: skip
    (state / "abc123").mkdir(parents=True)
    (state / "abc123" / "state.json").write_text(json.dumps(recorded))
    (state / "broken").mkdir()
    (state / "broken" / "state.json").write_text("{")
    labs = tunnelbench(["lab", "status", "--json"], tmp_path, TUNNELBENCH_STATE_DIR=str(state))
    by_id = {lab["id"]: lab for lab in labs}
    assert by_id["abc123"] == {
        "id": "abc123", "topology": "road-warrior", "tunnel": "vxlan", "namespaces": 3,
        "namespaces_present": 0, "processes": 1, "processes_alive": 0, "in_use_by": None,
        "error": None,
    }  # fmt: skip
    assert by_id["broken"]["error"].startswith("unreadable state file")
    assert by_id["broken"]["topology"] is None
