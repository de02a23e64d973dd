"""Harness fidelity: tunnelbench's baseline figure against raw iperf3 run by hand.

Alternates a full tunnelbench trial (fresh lab, probes, store) with a hand-run iperf3 in a
lab of the same settings, so drift affects both alike. Goal: ratio of medians >= 0.97.
Done unshaped (CPU-bound, noisy) and over a 1 Gbit/s tbf (link-bound, steady).
"""

import json
import random
import statistics
import subprocess
import tempfile
from pathlib import Path

from tunnelbench.bench.labpool import LabPool
from tunnelbench.bench.runner import Resolution, run_trial
from tunnelbench.bench.store import Store
from tunnelbench.bench.testbeds.lab import LabTestbed
from tunnelbench.kinds import StreamMode
from tunnelbench.lab import netns
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import (
    Experiment,
    LabSettings,
    LinkSettings,
    TrafficSettings,
    Trial,
    TrialConfig,
)
from tunnelbench.tunnels.base import TunnelSpec

ROUNDS = 7
DURATION, WARMUP = 5, 1


def raw_iperf3(settings: LabSettings) -> float:
    """Goodput of `iperf3 -c SERVER -t 5 -O 1` typed by hand in a fresh lab, in bit/s."""
    lab = netns.build(settings)
    try:
        server = subprocess.Popen(
            ["ip", "netns", "exec", lab.ns("server"), "iperf3", "-s", "-1", "-p", "5999"],
            stdout=subprocess.DEVNULL,
        )
        try:
            for _ in range(100):
                ss = lab.exec("server", ["ss", "-Htln", "sport", "= :5999"]).stdout
                if ss.strip():
                    break
            out = lab.exec(
                "client",
                ["iperf3", "-c", "198.18.1.2", "-p", "5999", "-t", str(DURATION),
                 "-O", str(WARMUP), "-J"],
                timeout=60,
            ).stdout  # fmt: skip
        finally:
            server.wait(timeout=10)
        return float(json.loads(out)["end"]["sum_received"]["bits_per_second"])
    finally:
        lab.teardown()


def ratio_interval(ours: list[float], theirs: list[float]) -> tuple[float, float]:
    """95% percentile-bootstrap interval of median(ours) / median(theirs)."""
    rng = random.Random(0)
    ratios = sorted(
        statistics.median(rng.choices(ours, k=len(ours)))
        / statistics.median(rng.choices(theirs, k=len(theirs)))
        for _ in range(2000)
    )
    return ratios[49], ratios[1949]


def compare(label: str, settings: LabSettings) -> float:
    config = TrialConfig(lab=settings, traffic=TrafficSettings(duration=DURATION, warmup=WARMUP))
    resolution = Resolution(TunnelSpec("kernel", 0), "linux", StreamMode.SINGLE)
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        run_id = store.start_run("benchmark", Experiment((config,)), Environment())
        for i in range(ROUNDS):
            with LabTestbed(LabPool()) as lab:
                outcome = run_trial(store, run_id, Trial(i + 1, i + 1, config), resolution, lab)
            assert outcome.status == "ok", outcome.error
            ours.append(outcome.metrics["goodput_bps"])
            theirs.append(raw_iperf3(settings))
        store.close()
    ratio = statistics.median(ours) / statistics.median(theirs)
    low, high = ratio_interval(ours, theirs)
    print(
        f"{label}: tunnelbench median {statistics.median(ours) / 1e6:,.0f} Mbit/s "
        f"(runs {', '.join(f'{v / 1e6:,.0f}' for v in ours)}); raw iperf3 median "
        f"{statistics.median(theirs) / 1e6:,.0f} Mbit/s "
        f"(runs {', '.join(f'{v / 1e6:,.0f}' for v in theirs)}); ratio {ratio:.3f} "
        f"(95% bootstrap interval {low:.3f}-{high:.3f}; "
        f"{'meets' if ratio >= 0.97 else 'MISSES'} the 0.97 goal)"
    )
    return ratio


def main() -> None:
    compare("unshaped baseline", LabSettings())
    compare("1gbit tbf baseline", LabSettings(wan=LinkSettings(rate=10**9)))


if __name__ == "__main__":
    main()
