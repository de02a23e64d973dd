"""Run-to-run variation of CPU-bound figures under each way of running them, side by side.

Each variant measures the same four configurations (no tunnel and wireguard-go, 1 and 4
streams) 10 times, in real tunnelbench runs interleaved across repetitions, and prints
per configuration the median, the coefficient of variation (CV), the CV without the
first round (the cold effect), and the evidence the trials recorded about where the time
went (steal, migrations and involuntary switches of the lab's threads, where present),
and how much the cores' own speed moved (``cpu<N>.speed``: the CV of the cores' mean rate
over the runs, and its correlation with goodput: a guest cannot see a host that runs its
vCPUs slower, but a fixed loop can).

- ``kept/free`` and ``kept/pinned`` run in one experiment (placement is a configuration
  setting), so they share every drift of the machine;
- ``fresh/free`` builds a lab for every trial, as tunnelbench did before labs were kept:
  it is the comparison for lab reuse. Its medians are set against ``kept/free``'s with the
  rank test, and a link-bound pair (1 Gbit/s tbf) shows whether reuse moves an exact
  figure.

Each experiment's wall time is divided by its measured seconds (the trials' windows).
Run alone: `python -m benchmarks variance` (about 12 minutes on the 2-core VM).
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

from tunnelbench.analysis.significance import compare
from tunnelbench.bench import measurement_lock, runner
from tunnelbench.bench.progress import Progress
from tunnelbench.bench.store import Store
from tunnelbench.kinds import Placement, TunnelKind
from tunnelbench.model.plan import (
    Experiment,
    LabSettings,
    LinkSettings,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
)
from tunnelbench.model.records import TrialRecord, TrialStatus

RUNS = 10
DURATION, WARMUP = 3, 1
TUNNELS = (TunnelKind.NONE, TunnelKind.WIREGUARD)
STREAMS = (1, 4)
#: Evidence per trial, by metric name: the median over a configuration's runs is shown.
EVIDENCE = {
    "steal %": "steal",
    "migrations": "sched.migrations",
    "invol. sw.": "sched.involuntary_switches",
    "outside %": "load.outside_pct",
}


def configs(placements: tuple[Placement, ...], lab: LabSettings) -> tuple[TrialConfig, ...]:
    return tuple(
        TrialConfig(
            lab=LabSettings(topology=lab.topology, wan=lab.wan, placement=placement, cpus=lab.cpus),
            tunnel=TunnelSettings(kind=kind),
            traffic=TrafficSettings(streams=streams, duration=DURATION, warmup=WARMUP),
        )
        for placement in placements
        for kind in TUNNELS
        for streams in STREAMS
    )


def measure(experiment: Experiment, db: Path) -> tuple[list[TrialRecord], float]:
    """Every trial of ``experiment``, and the run's wall time divided by its measured
    seconds."""
    prepared = runner.prepare(experiment, strict=True)
    store = Store(db)
    run_id = runner.start(prepared, store, command_line="benchmarks.variance")
    began = time.monotonic()
    runner.execute(prepared, store, run_id, progress=Progress())
    wall = time.monotonic() - began
    trials = store.trials(run_id)
    store.close()
    bad = [t for t in trials if t.status is not TrialStatus.OK]
    if bad:
        sys.exit(f"trial {bad[0].seq} {bad[0].status}: {bad[0].error}")
    return trials, wall / (DURATION * len(trials))


def label(config: TrialConfig) -> str:
    kind = "wireguard-go" if config.tunnel.kind is TunnelKind.WIREGUARD else "none"
    return f"{kind}, {config.traffic.streams} stream{'s' * (config.traffic.streams > 1)}"


def cv(values: list[float]) -> float:
    return 100.0 * statistics.stdev(values) / statistics.mean(values)


def steal(metrics: dict[str, float]) -> float | None:
    found = [v for name, v in metrics.items() if name.endswith(".steal")]
    return max(found) if found else None


def speed(metrics: dict[str, float]) -> float | None:
    """The cores' mean rate of the fixed loop (probes.speed) over the window."""
    found = [v for name, v in metrics.items() if name.endswith(".speed")]
    return statistics.mean(found) if found else None


def speed_evidence(trials: list[TrialRecord]) -> str:
    pairs = [(t.metrics["goodput_bps"], v) for t in trials if (v := speed(t.metrics)) is not None]
    if len(pairs) < 3:
        return ""
    goodput, rates = zip(*pairs, strict=True)
    text = f"core speed CV {cv(list(rates)):.1f}%"
    if len(set(rates)) > 1 and len(set(goodput)) > 1:
        text += f", r(goodput, speed) {statistics.correlation(goodput, rates):+.2f}"
    return text


def evidence(trials: list[TrialRecord]) -> str:
    parts = [found] if (found := speed_evidence(trials)) else []
    for title, name in EVIDENCE.items():
        if name == "steal":
            values = [v for t in trials if (v := steal(t.metrics)) is not None]
        else:
            values = [t.metrics[name] for t in trials if name in t.metrics]
        if values:
            parts.append(f"{title} {statistics.median(values):,.1f}")
    return ", ".join(parts)


def by_config(trials: list[TrialRecord]) -> dict[str, list[TrialRecord]]:
    groups: dict[str, list[TrialRecord]] = {}
    for trial in sorted(trials, key=lambda t: t.seq):
        groups.setdefault(trial.config_key, []).append(trial)
    return groups


def table(variant: str, trials: list[TrialRecord]) -> dict[str, list[float]]:
    """Print one variant's rows; return goodput (Mbit/s) by configuration label."""
    figures: dict[str, list[float]] = {}
    for group in by_config(trials).values():
        config = group[0].config
        values = [t.metrics["goodput_bps"] / 1e6 for t in group]
        figures[label(config)] = values
        print(
            f"  {variant:<13} {label(config):<24} median {statistics.median(values):>9,.0f}"
            f"  CV {cv(values):5.1f}%  without round 1 {cv(values[1:]):5.1f}%"
            f"  (round 1 {values[0]:,.0f}; {evidence(group)})"
        )
    return figures


def main() -> None:
    lock = measurement_lock.acquire(allow_concurrent=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            unshaped = LabSettings()
            placements = (Placement.FREE, Placement.PINNED)
            kept, kept_ratio = measure(
                Experiment(configs(placements, unshaped), repetitions=RUNS),
                Path(tmp) / "kept.db",
            )
            fresh, fresh_ratio = measure(
                Experiment(configs((Placement.FREE,), unshaped), RUNS, fresh_labs=True),
                Path(tmp) / "fresh.db",
            )
            shaped = LabSettings(wan=LinkSettings(rate=1_000_000_000))
            link = TrialConfig(
                lab=shaped, traffic=TrafficSettings(duration=DURATION, warmup=WARMUP)
            )
            link_kept, _ = measure(Experiment((link,), 5), Path(tmp) / "link-kept.db")
            link_fresh, _ = measure(
                Experiment((link,), 5, fresh_labs=True), Path(tmp) / "link-fresh.db"
            )
    finally:
        lock.release()
    print(f"CV of goodput over {RUNS} runs of {DURATION} s each (Mbit/s):")
    free = [t for t in kept if t.config.lab.placement is Placement.FREE]
    pinned = [t for t in kept if t.config.lab.placement is Placement.PINNED]
    kept_free = table("kept/free", free)
    table("kept/pinned", pinned)
    fresh_free = table("fresh/free", fresh)
    print("Lab reuse against a fresh lab per trial (free placement), B = kept, A = fresh:")
    pairs = [(name, fresh_free[name], kept_free[name]) for name in fresh_free]
    link_a = [t.metrics["goodput_bps"] / 1e6 for t in link_fresh]
    link_b = [t.metrics["goodput_bps"] / 1e6 for t in link_kept]
    pairs.append(("none, 1 stream, 1 Gbit/s tbf", link_a, link_b))
    for name, a, b in pairs:
        found = compare(a, b)
        print(
            f"  {name:<30} fresh {statistics.median(a):>9,.1f}  kept {statistics.median(b):>9,.1f}"
            f"  B/A {found.ratio or 0:.4f}  p = {found.p:.3f}  ({found.verdict})"
        )
    print(
        f"Wall time / measured time: kept labs {kept_ratio:.2f}, fresh labs {fresh_ratio:.2f}"
        f" (a trial also runs {WARMUP} s of warm-up; 4 streams run 2 s longer)"
    )


if __name__ == "__main__":
    main()
