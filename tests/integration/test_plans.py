"""Plan files run for real: every scenario in --quick mode, interruption and resume, and
a tunnel daemon killed in the middle of a run."""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench import planfile
from tunnelbench.bench.store import Store
from tunnelbench.lab.state import STATE_ROOT, LabState, known_labs
from tunnelbench.model.plan import expand

ROOT = Path(__file__).resolve().parents[2]
# The scenarios whose labs run on this machine's kernel; those on another kernel boot a
# VM each, and tests/kernel runs their features (their plans: tests/unit/test_planfile).
# Left out too, to keep make test within its time, each a matrix of settings that other
# tests run with their statistics: the CPU-budget scenarios (test_lab_settings,
# test_router_settings, test_tune), slow-end (test_router_scenarios), iperf2-vs-iperf3
# (test_iperf2 runs its plan with iperf2), wireguard-implementations (test_wireguard_impls
# runs its implementations in one plan) and tunnel-vs-baseline (WireGuard's MTU and
# streams: test_run, test_small_mtu, test_tune), jumbo-mtu-generator (a 65535-byte MTU
# with one process or one per stream: test_tune; WireGuard's jumbo frames:
# test_wireguard_impls) and l2-tunnel-ipsec (VXLAN and gretap in ESP: test_ipsec,
# test_remote_kinds) and every-tunnel (32 quick trials, 55 s: test_lab builds each kind this
# kernel has, and test_wireguard_impls, test_openvpn and test_ipsec carry traffic through
# each implementation and cipher). Every scenario is still read and held to its golden
# expansion in tests/unit/test_planfile.py.
MEASURED_ELSEWHERE = {
    "router-cpu-budget", "slow-end", "iperf2-vs-iperf3", "wireguard-implementations",
    "tunnel-vs-baseline", "jumbo-mtu-generator", "l2-tunnel-ipsec", "every-tunnel",
}  # fmt: skip
SCENARIOS = [
    path
    for path in sorted((ROOT / "scenarios").glob("*.toml"))
    if not any(c.lab.in_vm for c in planfile.load(path).experiment.configs)
    and path.stem not in MEASURED_ELSEWHERE
]
# What this kernel lacks (see DESIGN.md); a skip for any other reason is a defect.
MISSING_HERE = (
    "fq_codel", "cake", "links cannot be created here (",
    "this kernel cannot create a wireguard link",
)  # fmt: skip


def _stored(db: Path) -> int:
    """Trials stored so far by a run in progress (its database may not be set up yet)."""
    try:
        return len(_trials(db)) if db.exists() else 0
    except sqlite3.OperationalError:
        return 0


def _trials(db: Path, run_id: int = 1) -> list[dict[str, object]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT seq, config_key, status, error FROM trials WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    return [dict(r) for r in rows]


def _run_status(db: Path, run_id: int = 1) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0])


#: The scenarios whose run here also writes its reports (its HTML's charts are drawn for
#: every configuration: 2-4 s a run); the rest are stored only, their reports drawn from
#: recorded runs in tests/unit and tests/browser.
REPORTED = {"queue-comparison"}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_scenario_runs_to_completion_in_quick_mode(scenario, tmp_path):
    db = tmp_path / "results.db"
    reports = [] if scenario.stem in REPORTED else ["--no-reports"]
    done = tunnelbench(
        "run", str(scenario), "--quick", "--json", "--db", str(db), *reports, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    written = sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".html", ".md", ".png"))
    assert written == ([] if reports else ["results-run1-summary.png", "results-run1.html",
                                           "results-run1.md"])  # fmt: skip
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["event"] == "run_started" and events[-1] == {
        "event": "run_finished",
        "run_id": 1,
        "status": "complete",
    }
    expected = expand(planfile.load(scenario, quick=True).experiment)
    trials = _trials(db)
    assert [(t["seq"], t["config_key"]) for t in trials] == [
        (t.seq, t.config.key()) for t in expected
    ]
    for trial in trials:
        if trial["status"] == "skipped":
            assert any(q in str(trial["error"]) for q in MISSING_HERE), trial["error"]
        else:
            assert trial["status"] == "ok", trial["error"]
    finished = [e for e in events if e["event"] == "trial_finished" and e["status"] == "ok"]
    assert finished and all(e["goodput_bps"] > 1e6 for e in finished)
    assert _run_status(db) == "complete"
    _estimate_learns_from(scenario, db)


def _estimate_learns_from(scenario: Path, db: Path) -> None:
    """`plan show --db` counts the run's own trials: each kind with 5 or more gives its
    median, which lies among that kind's overheads as this test computes them."""
    shown = tunnelbench("plan", "show", str(scenario), "--quick", "--json", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    overheads = json.loads(shown.stdout)["overheads"]
    store = Store.read(db)
    try:
        run = store.run("latest")
        trials = store.trials(run.id)
    finally:
        store.close()
    with sqlite3.connect(db) as conn:
        spans = dict(conn.execute("SELECT id, ended_at - started_at FROM trials").fetchall())
    kinds: dict[str, list[float]] = {}
    for trial in trials:
        if trial.status != "ok":
            continue
        traffic = trial.config.traffic
        warmup = trial.metrics.get("warmup.s", traffic.warmup)
        vm = "vm_" if trial.config.lab.in_vm else ""
        kind = vm + ("built_s" if trial.resolved.lab.fresh else "kept_s")
        kinds.setdefault(kind, []).append(spans[trial.id] - traffic.duration - warmup)
    for kind, values in kinds.items():
        figure = overheads[kind]
        if len(values) < 5:
            assert figure["learned_from"] is None, (kind, figure)
            continue
        assert figure["learned_from"] == len(values), (kind, figure)
        assert min(values) - 0.01 <= figure["seconds"] <= max(values) + 0.01, (kind, values)
    print("overheads learned:", {k: v for k, v in overheads.items() if v["learned_from"]})


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_plan_show_marks_what_this_kernel_lacks_without_root(user, tmp_path):
    plan = ROOT / "scenarios" / "queue-comparison.toml"
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    tmp_path.chmod(0o777)
    before = sorted(STATE_ROOT.iterdir()) if STATE_ROOT.is_dir() else []
    shown = subprocess.run(
        [*(prefix if user == "nobody" else []), sys.executable, "-m", "tunnelbench"]
        + ["plan", "show", str(plan), "--quick"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "300"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "= 16 trials" in shown.stdout
    # fq_codel and cake, upload and download, tunnel and baseline.
    assert "skipped on this machine: 8 trial(s)" in shown.stdout
    assert "lab.wan.queue: fq_codel is not available" in shown.stdout
    assert list(tmp_path.iterdir()) == []
    assert (sorted(STATE_ROOT.iterdir()) if STATE_ROOT.is_dir() else []) == before


@contextlib.contextmanager
def background_run(
    tmp_path: Path, plan_text: str, verb: str = "run"
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """``tunnelbench run PLAN`` (or ``tune PLAN``) started in the background; stopped with
    Ctrl-C on the way out if the test left it going (a failed test must not leave a run
    building labs)."""
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text)
    db = tmp_path / "results.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunnelbench", verb, str(plan), "--db", str(db), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc, db
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)


PLAN = """
name = "resume-test"
repetitions = 2
[base.traffic]
duration = 1
warmup = 0
[matrix]
"tunnel.kind" = ["none", "vxlan"]
"traffic.streams" = [1, 2]
"""


def test_interrupted_run_resumes_to_the_same_trials(tmp_path):
    expected = [(t.seq, t.config.key()) for t in expand(planfile.parse(PLAN, "p").experiment)]
    assert len(expected) == 8
    with background_run(tmp_path, PLAN) as (proc, db):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _stored(db) < 2:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    stored = _trials(db)
    assert 2 <= len(stored) < 8
    assert _run_status(db) == "interrupted"

    done = tunnelbench("run", "--resume", "1", "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"resuming after {len(stored)} stored" in done.stdout
    trials = _trials(db)
    assert [(t["seq"], t["config_key"]) for t in trials] == expected
    assert all(t["status"] == "ok" for t in trials)
    assert _run_status(db) == "complete"
    again = tunnelbench("run", "--resume", "1", "--db", str(db))
    assert again.returncode == 2
    assert "run 1 is complete; there is nothing to resume" in again.stderr


DAEMON_PLAN = """
name = "daemon-dies"
repetitions = 2
[base.tunnel]
kind = "wireguard"
implementation = "wireguard-go"
[base.traffic]
duration = 3
warmup = 0
"""


def _daemon_of_running_lab() -> int | None:
    for lab_id in known_labs():
        try:
            state = LabState.load(lab_id)
        except (OSError, ValueError):
            continue
        daemons = [p for p in state.processes if "wireguard-go" in p.argv[-3]]
        clients = [p for p in state.processes if "-c" in p.argv]
        if daemons and clients:
            return daemons[0].pid
    return None


def test_trial_whose_tunnel_daemon_dies_fails_and_the_run_goes_on(tmp_path):
    with background_run(tmp_path, DAEMON_PLAN) as (proc, db):
        victim = None
        deadline = time.monotonic() + 60
        while victim is None and time.monotonic() < deadline:
            victim = _daemon_of_running_lab()
            time.sleep(0.05)
        assert victim is not None, "no wireguard-go daemon seen under " + str(STATE_ROOT)
        time.sleep(1.0)  # into the traffic
        subprocess.run(["kill", "-KILL", str(victim)], check=True)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err  # a failed trial makes the exit code 1
    trials = _trials(db)
    assert [t["status"] for t in trials] == ["ok", "failed", "ok", "ok"]
    assert "wireguard-go" in str(trials[1]["error"]) and "died" in str(trials[1]["error"])
    assert _run_status(db) == "complete"
    assert "trial 2 failed" in out
