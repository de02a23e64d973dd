"""Time to an answer, side by side in one run: the default run, a queue comparison and a
kernel scenario in a VM guest, each against the seconds it measured (wall ÷ measured)
and against the estimate `plan show` gives before it starts (estimate ÷ actual), then a
VM guest's start and per-trial cost against the host's (benchmarks/vm). Run it alone:
about 12 minutes on the 2-core reference machine."""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import vm
from tunnelbench.bench import planfile
from tunnelbench.bench.store import Store
from tunnelbench.cli import main as cli
from tunnelbench.cli import options
from tunnelbench.model.plan import expand
from tunnelbench.model.records import TrialStatus

ROOT = Path(__file__).resolve().parents[1]
#: (what, plan file or None for the default run, --quick)
RUNS = (
    ("default run (host)", None, False),
    ("queue-comparison --quick (host)", ROOT / "scenarios" / "queue-comparison.toml", True),
    ("kernel-wireguard-mtu --quick (VM)", ROOT / "scenarios" / "kernel-wireguard-mtu.toml", True),
)


def estimate(plan: Path | None, quick: bool) -> float:
    """What `plan show` (or, for the default run, the same sum) says before the run."""
    if plan is None:
        experiment = options.build_experiment(cli.parser().parse_args(["run"]))
        return planfile.estimate_seconds(expand(experiment))
    shown = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "plan", "show", str(plan), "--json"]
        + (["--quick"] if quick else []),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(json.loads(shown.stdout)["estimated_seconds"]["max"])


def timed(plan: Path | None, quick: bool) -> tuple[float, float, int]:
    """The run's wall time, the seconds its finished trials measured, and their count."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "t.db"
        argv = [sys.executable, "-m", "tunnelbench", "run", "--db", str(db), "-q"]
        argv += ([str(plan)] if plan else []) + (["--quick"] if quick else [])
        began = time.monotonic()
        subprocess.run(argv, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - began
        store = Store.read(db)
        try:
            run = store.run("latest")
            trials = [t for t in store.trials(run.id) if t.status is TrialStatus.OK]
        finally:
            store.close()
        measured = sum(float(t.config["traffic"]["duration"]) for t in trials)
        return wall, measured, len(trials)


def main() -> None:
    print(f"{'':36} {'wall':>8} {'measured':>9} {'wall÷meas':>9} {'estimate':>9} {'est÷wall':>8}")
    for what, plan, quick in RUNS:
        guess = estimate(plan, quick)
        wall, measured, count = timed(plan, quick)
        print(
            f"{what:36} {wall:7.1f}s {measured:8.0f}s {wall / measured:9.2f}"
            f" {guess:8.0f}s {guess / wall:8.2f}   ({count} trials)"
        )
    host_start, host = vm.timed_run("host")
    vm_start, guest = vm.timed_run("debian")
    traffic = vm.DURATION + vm.WARMUP
    h, g = sorted(host)[len(host) // 2], sorted(guest)[len(guest) // 2]
    print(f"until the first trial:      host {host_start:5.1f} s   VM {vm_start:5.1f} s")
    print(
        f"a trial besides its traffic: host {h - traffic:5.1f} s   VM {g - traffic:5.1f} s"
        f"   (median of {vm.RUNS}, {traffic} s of traffic each)"
    )


if __name__ == "__main__":
    main()
