"""``tune`` against the full matrix of the same candidates, side by side in one run.

For each case (a real lab with a known fix, 1 s trials) a tuning session runs to its
natural end; then the full matrix of every value it tried of every setting it touched
(the product, each configuration repeated as often as the session's comparisons needed)
runs as an ordinary experiment. Printed: wall time and trials of each, their ratio, and
whether the matrix's fastest configuration is the one the session ended with. Root; run
it alone (both halves measure CPU and links).
"""

import itertools
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tunnelbench.analysis.summary import summarize_run
from tunnelbench.bench import planfile, runner
from tunnelbench.bench import tune as tuning
from tunnelbench.bench.store import Store
from tunnelbench.bench.tune_progress import TuneProgress
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, Trial, TrialConfig, flatten
from tunnelbench.model.tuning import TuneRecord
from tunnelbench.report import tune as tune_report

CASES = {
    "tiny FIFO (100 Mbit/s, pfifo 4, 4 streams)": """
[base.lab.wan]
rate = "100mbit"
queue = "pfifo"
queue_limit = 4
[base.traffic]
streams = 4
stream_mode = "single"
duration = 1
warmup = 0
""",
    "one iperf3 process, 8 streams, MTU 65535": """
[base.lab]
lan_mtu = 65535
[base.lab.wan]
mtu = 65535
[base.traffic]
streams = 8
stream_mode = "single"
duration = 1
warmup = 0
""",
    "wireguard-go at 10% of a core, 4 processes": """
[base.tunnel]
kind = "wireguard"
implementation = "wireguard-go"
cpu_budget = "10%"
[base.traffic]
streams = 4
stream_mode = "processes"
duration = 1
warmup = 0
""",
}


def _tune(start: TrialConfig, db: Path) -> tuple[float, TuneRecord, int]:
    request = tuning.Request(start=start)
    prepared = tuning.prepare(request)
    store = Store(db)
    began = time.monotonic()
    run_id, record = tuning.begin(request, prepared, store, command_line="benchmark", lock=None)
    tuning.Session(store, run_id, record, TuneProgress()).execute()
    wall = time.monotonic() - began
    trials = len(store.trials(run_id))
    store.close()
    return wall, record, trials


def _matrix(record: TuneRecord) -> list[TrialConfig]:
    """Every combination of the values the session tried, from its start."""
    start = record.start
    tried: dict[str, list[Any]] = defaultdict(list)
    for step in record.steps:
        for candidate in step.candidates:
            values = tried[candidate.setting]
            for value in (flatten(start.to_dict()).get(candidate.setting), candidate.value):
                if value not in values:
                    values.append(value)
    configs: dict[str, TrialConfig] = {}
    for combination in itertools.product(*tried.values()):
        config = planfile.derive(start, dict(zip(tried, combination, strict=True)))
        configs.setdefault(config.key(), config)
    return list(configs.values())


def _run_matrix(configs: list[TrialConfig], repetitions: int, db: Path) -> tuple[float, str, int]:
    experiment = Experiment(configs=tuple(configs), repetitions=repetitions)
    store = Store(db)
    began = time.monotonic()
    # Interleaved rounds of exactly these configurations: without the no-tunnel baseline
    # that `run` adds, which the session did not measure either.
    trials = [
        Trial(seq=round_ * len(configs) + i + 1, repetition=round_ + 1, config=config)
        for round_ in range(repetitions)
        for i, config in enumerate(configs)
    ]
    resolutions, skipped = runner.check(trials)
    prepared = runner.Prepared(experiment, trials, resolutions, skipped)
    run_id = runner.start(prepared, store, command_line="benchmark")
    runner.execute(prepared, store, run_id)
    wall = time.monotonic() - began
    stored = store.trials(run_id)
    summaries = [s for s in summarize_run(stored, Environment()) if s.goodput]
    fastest = max(summaries, key=lambda s: s.goodput.median if s.goodput else 0.0)
    store.close()
    return wall, fastest.key, len(stored)


def main() -> None:
    runner.preflight()
    for name, text in CASES.items():
        with tempfile.TemporaryDirectory() as directory:
            (start,) = planfile.parse(text, name).experiment.configs
            tune_wall, record, tune_trials = _tune(start, Path(directory) / "tune.db")
            configs = _matrix(record)
            repetitions = max(step.runs_needed for step in record.steps)
            matrix_wall, fastest, matrix_trials = _run_matrix(
                configs, repetitions, Path(directory) / "matrix.db"
            )
        kept = [candidate.change for _, candidate in record.kept()]
        same = "yes" if fastest == record.final_key else "no"
        print(
            f"{name}: tune {tune_wall:.0f} s ({tune_trials} trials, kept"
            f" {', '.join(kept) or 'nothing'}; {record.end}) vs the full matrix of"
            f" {len(configs)} configurations x {repetitions} runs {matrix_wall:.0f} s"
            f" ({matrix_trials} trials): ratio {tune_wall / matrix_wall:.2f};"
            f" the matrix's fastest is tune's final: {same}"
        )
        print("\n".join("    " + line for line in tune_report.terminal(record).splitlines()))


if __name__ == "__main__":
    main()
