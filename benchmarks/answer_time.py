"""Time to an answer, side by side in one run: the default run, a queue comparison and a
kernel scenario in a VM guest, each against the seconds it measured (wall ÷ measured)
and against the estimate `plan show` gives before it starts (estimate ÷ actual: with the
reference machine's overheads, and learned from the benchmark's runs before it), then a
VM guest's start and per-trial cost against the host's (benchmarks/vm). Run it alone:
about 12 minutes on the 2-core reference machine."""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import vm
from tunnelbench.bench import learned, planfile
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


def estimate(plan: Path | None, quick: bool, db: Path) -> float:
    """What `plan show --db DB` (or, for the default run, the same sum) says before the
    run: the reference machine's overheads where ``db`` holds no trials of a kind."""
    if plan is None:
        experiment = options.build_experiment(cli.parser().parse_args(["run"]))
        return planfile.estimate_seconds(expand(experiment), overheads=learned.overheads(db))
    shown = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "plan", "show", str(plan), "--json"]
        + ["--db", str(db)] + (["--quick"] if quick else []),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(json.loads(shown.stdout)["estimated_seconds"]["max"])


def timed(plan: Path | None, quick: bool, db: Path) -> tuple[float, float, int]:
    """The run's wall time, the seconds its finished trials measured, and their count;
    the run is stored in ``db`` after the runs before it."""
    argv = [sys.executable, "-m", "tunnelbench", "run", "--db", str(db), "-q"]
    argv += ([str(plan)] if plan else []) + (["--quick"] if quick else [])
    began = time.monotonic()
    subprocess.run(argv, cwd=db.parent, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - began
    store = Store.read(db)
    try:
        run = store.run("latest")
        trials = [t for t in store.trials(run.id) if t.status is TrialStatus.OK]
    finally:
        store.close()
    measured = sum(float(t.config.traffic.duration) for t in trials)
    return wall, measured, len(trials)


def main() -> None:
    print(
        f"{'':36} {'wall':>8} {'measured':>9} {'wall÷meas':>9} {'estimate':>9} {'est÷wall':>8}"
        f" {'learned':>8} {'÷wall':>6}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        # Every run in one database: each estimate learns from the runs before it (the
        # first has nothing to learn from), "estimate" from none.
        db, empty = Path(tmp) / "t.db", Path(tmp) / "empty.db"
        for what, plan, quick in RUNS:
            guess, taught = estimate(plan, quick, empty), estimate(plan, quick, db)
            wall, measured, count = timed(plan, quick, db)
            print(
                f"{what:36} {wall:7.1f}s {measured:8.0f}s {wall / measured:9.2f}"
                f" {guess:8.0f}s {guess / wall:8.2f} {taught:7.0f}s {taught / wall:6.2f}"
                f"   ({count} trials)"
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
