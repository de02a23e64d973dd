"""``tunnelbench tune`` on real labs with a known fix: it must find the fix and prove a
significant gain, leave a configuration at its ceiling unchanged, stop at its budget,
and resume after Ctrl-C. 1 s trials; each session is limited to its first step."""

import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.integration.helpers import tunnelbench
from tests.integration.test_plans import _run_status, _stored, _trials, background_run
from tunnelbench.analysis import tuning
from tunnelbench.bench import planfile
from tunnelbench.bench.store import Store
from tunnelbench.model.tuning import Step, TuneRecord
from tunnelbench.system import probing

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "report-schema.json").read_text())
SHORT = "[base.traffic]\nduration = 1\nwarmup = 0\n"
#: A 4-packet FIFO on a 100 Mbit/s link, four bbr senders. The lab's senders use cubic
#: unless told otherwise, and cubic's four flows fill this sub-millisecond path through
#: it at 97.5% of the ceiling (its bandwidth-delay product is under one packet): nothing
#: to gain from a larger queue. bbr's pacing probes overflow it and cost goodput, the
#: fix tune must find; a queue that holds more than the path's product needs a path
#: longer than this kernel's lab builds (netem).
TINY_FIFO = """
[base.lab.wan]
rate = "100mbit"
queue = "pfifo"
queue_limit = 4
[base.traffic]
streams = 4
stream_mode = "single"
duration = 1
warmup = 0
congestion = "bbr"
"""


def _tune(tmp_path: Path, plan_text: str, *options: str) -> tuple[dict[str, Any], TuneRecord]:
    kernel = probing.congestion()
    if 'congestion = "bbr"' in plan_text and "bbr" not in kernel.available + kernel.loadable:
        pytest.skip(f"traffic.congestion: this kernel has no bbr ({kernel.detail})")
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text)
    db = tmp_path / "tune.db"
    done = tunnelbench("tune", str(plan), "--db", str(db), "--no-reports", *options, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    report = tunnelbench("report", "1", "--format", "json", "--db", str(db))
    document = json.loads(report.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    return document, TuneRecord.from_dict(_tune_column(db))


def _tune_column(db: Path) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        value: dict[str, Any] = json.loads(conn.execute("SELECT tune FROM runs").fetchone()[0])
    return value


def _kept_significant(record: TuneRecord, setting: str) -> Any:
    """The change step 1 kept, checked to be a significant gain on enough runs."""
    step = record.steps[1]
    tried = [(c.setting, c.value, c.outcome, c.p, c.ratio_ci, c.runs) for c in step.candidates]
    assert record.kept(), (record.end, tried)
    (_, kept), *_ = record.kept()
    assert kept.setting == setting, tried
    assert kept.outcome == "better"
    assert kept.p is not None and kept.p < step.alpha, tried
    assert kept.ratio_ci is not None and kept.ratio_ci[0] > 1.02, tried
    assert min(kept.runs, kept.best_runs) >= step.runs_needed, tried
    return kept


def _limits_advised(step: Step) -> list[int]:
    """The queue limits a tiny FIFO's advice proposed: what its 4 flows need (4 segments
    each, in packets of the size the queue held: GSO/GRO aggregates with the lab's
    offloads on, so fewer than 16) and 4 times that."""
    limits = sorted(c.value for c in step.candidates if c.setting == "lab.wan.queue_limit")
    assert len(limits) == 2 and limits[0] > 4 and limits[1] == 4 * limits[0], limits
    return limits


def test_a_tiny_fifo_is_fixed_by_a_larger_queue(tmp_path):
    document, record = _tune(tmp_path, TINY_FIFO, "--max-steps", "1")
    assert [s.number for s in record.steps] == [0, 1]
    assert "dropped" in record.steps[1].diagnosis  # the queue-drop verdict gave the advice
    kept = _kept_significant(record, "lab.wan.queue_limit")
    assert kept.value in _limits_advised(record.steps[1])
    # fq_codel and cake: measured where the kernel has them, else not tried, with why.
    tried = {c.value for c in record.steps[1].candidates if c.setting == "lab.wan.queue"}
    for excluded in record.steps[1].excluded:
        assert excluded.setting == "lab.wan.queue" and "not available" in excluded.reason
        tried.add(excluded.value)
    assert tried == {"fq_codel", "cake"}
    assert record.end == "step limit reached" and record.final_key == kept.key
    # The final plan runs exactly the kept configuration.
    (final,) = planfile.parse(document["tune"]["plan"], "final").experiment.configs
    assert final.key() == kept.key
    # Every trial of the session is in the run, with its configuration.
    counted = sum(len(c["runs"]) for c in document["configurations"])
    assert counted == document["run"]["trial_counts"]["ok"] == len(_trials(tmp_path / "tune.db"))
    markdown = tunnelbench("report", "1", "--format", "md", "--db", str(tmp_path / "tune.db"))
    text = " ".join(markdown.stdout.split())  # its lines wrap
    assert "## Tuning path" in text and "kept: lab.wan.queue_limit 4 →" in text


def test_one_process_for_many_streams_is_fixed_by_a_process_per_stream(tmp_path):
    jumbo = "[base.lab]\nlan_mtu = 65535\n[base.lab.wan]\nmtu = 65535\n" + SHORT
    # 16 streams. With 4, one run in six let the kernel take the receiving process's core
    # (67% of a core). With 8, in about one run in three neither process reached 90% (both
    # at 80-90%, the cores shared with the receive work, 29-34 Gbit/s instead of 20), and
    # a fresh clone's CI met two such runs of four ("no limit identified", the busiest at
    # 73%). With 16 the one process stays the limit: 8 tuning sessions of 8 found it,
    # their medians 93.9-97.9%, and a process per stream gained 39-156%. (Which end is
    # the limit may change between runs; the verdict takes each run's busiest process.)
    plan = jumbo + 'streams = 16\nstream_mode = "single"\n'
    _, record = _tune(tmp_path, plan, "--max-steps", "1")
    assert "generator is the limit" in record.steps[1].diagnosis
    kept = _kept_significant(record, "traffic.stream_mode")
    assert kept.value == "processes"


def test_a_cpu_budget_is_fixed_by_more_cpu_time_and_a_low_mtu_by_the_paths(tmp_path):
    """wireguard-go held to 10% of a core, at a tunnel MTU of 576 "to be safe": more CPU
    time is the larger gain, and the MTU the path carries (1500 less WireGuard's 80) is
    tried too, and is faster (each packet costs the daemon about the same)."""
    plan = (
        '[base.tunnel]\nkind = "wireguard"\nimplementation = "wireguard-go"\ncpu_budget = "10%"\n'
        "mtu = 576\n" + SHORT + 'streams = 4\nstream_mode = "processes"\n'
    )
    _, record = _tune(tmp_path, plan, "--max-steps", "1")
    # Every candidate's outcome and statistics, for an assertion's message: one run of
    # ten here added rounds (30 trials instead of 20-22) and failed, its reason lost.
    tried = [
        (c.setting, c.value, c.outcome, c.p, c.ratio_ci, c.runs, c.best_runs)
        for c in record.steps[1].candidates
    ]
    assert "against its CPU budget of 10%" in record.steps[1].diagnosis
    kept = _kept_significant(record, "tunnel.cpu_budget")
    assert kept.value in (0.2, None), tried
    budgets = {c.value: c for c in record.steps[1].candidates if c.setting == "tunnel.cpu_budget"}
    assert set(budgets) == {0.2, None}
    assert all(c.outcome == "better" for c in budgets.values()), tried  # both beat 10%
    (mtu,) = [c for c in record.steps[1].candidates if c.setting == "tunnel.mtu"]
    assert mtu.value == 1420 and mtu.outcome == "better", tried
    assert mtu.suggestion.startswith("raise tunnel.mtu to 1420")


def test_a_link_at_its_ceiling_has_nothing_to_improve_and_an_interrupted_session_resumes(
    tmp_path,
):
    plan = '[base.lab.wan]\nrate = "100mbit"\n' + SHORT
    with background_run(tmp_path, plan, "tune") as (proc, db):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _stored(db) < 2:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert _run_status(db) == "interrupted" and 2 <= len(_trials(db)) < 4
    refused = tunnelbench("run", "--resume", "1", "--db", str(db))
    assert refused.returncode == 2
    assert "is a tuning session; `tunnelbench tune --resume 1` continues it" in refused.stderr
    done = tunnelbench("tune", "--resume", "1", "--db", str(db), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _run_status(db) == "complete"
    # The start's runs, then nothing to try: 4, and more only while fewer than 3 of them
    # were undisturbed (a busy machine's outside load), the start ending at the first run
    # that completes them.
    store = Store.open_existing(db)
    start = store.trials(1)
    store.close()
    assert len(_trials(db)) == len(start) >= 4
    assert tuning.start_measured(start, 4, 10) and not tuning.start_measured(start[:-1], 4, 10)
    record = TuneRecord.from_dict(_tune_column(db))
    assert record.end == "nothing to improve" and record.kept() == []
    assert "link is the limit" in record.steps[-1].diagnosis
    assert record.steps[-1].candidates == [] and record.steps[-1].excluded == []
    assert "no change kept; ended: nothing to improve" in done.stdout


def test_the_budget_ends_a_session_with_its_candidates_undecided(tmp_path):
    _, record = _tune(tmp_path, TINY_FIFO, "--budget", "12s")
    assert record.end == "budget ended"
    assert record.spent_s < 17  # a round is started only when its estimate fits
    step = record.steps[-1]
    assert step.number == 1 and not step.done and step.winner is None
    assert step.candidates and all(c.outcome == "undecided" for c in step.candidates)


def test_a_queue_that_buys_goodput_with_latency_is_refused_when_latency_must_be_kept(tmp_path):
    """The tiny FIFO again: a longer queue is faster, and its loaded round trip is longer
    (0.8 → 5-14 ms here), so throughput-keeping-latency refuses it. The smaller limit
    advised (what 4 flows need, in the aggregates this queue holds) may gain too little to
    tell (6 packets: p = 0.043 at the step's level 0.025), or raise the round trip by too
    little to tell (1.27 → 1.65 ms, not significant): then it is better, and kept."""
    # A second of warm-up: without it the larger queue had not filled in one of its five
    # 1 s trials (loaded p95 1.68 ms against 5.2-6.6 ms in the others), and the rise
    # missed significance (seen in CI).
    filled = TINY_FIFO.replace("warmup = 0", "warmup = 1")
    _, record = _tune(
        tmp_path, filled, "--target", "throughput-keeping-latency", "--max-steps", "1"
    )
    step = record.steps[1]
    limits = [c for c in step.candidates if c.setting == "lab.wan.queue_limit"]
    assert sorted(c.value for c in limits) == _limits_advised(step)
    largest = max(limits, key=lambda c: c.value)
    assert largest.outcome == "raised latency", limits
    for candidate in limits:
        if candidate.outcome in ("no difference", "not decided"):  # neither shown
            continue
        assert candidate.outcome in ("raised latency", "better"), candidate
        assert candidate.loaded_p95_ms is not None
        assert candidate.ratio_ci is not None and candidate.ratio_ci[0] > 1  # it was faster
        if candidate.outcome == "raised latency":
            assert candidate.note.startswith("loaded RTT p95 ")
            assert candidate.loaded_p95_ms[1] > candidate.loaded_p95_ms[0]
    better = [c for c in step.candidates if c.outcome == "better"]
    if better:
        kept = [candidate for _, candidate in record.kept()]
        assert kept and kept[0].value in [c.value for c in better]
        assert largest.value not in [c.value for c in kept]
    else:
        assert record.kept() == [] and record.end == "nothing helped"


def test_the_latency_target_tries_only_advice_for_the_round_trip(tmp_path):
    """On the tiny FIFO the advice is a larger queue (for goodput) and fq_codel or cake
    (for both): the latency target measures only the fair queues, where the kernel has
    them."""
    _, record = _tune(tmp_path, TINY_FIFO, "--target", "latency", "--max-steps", "1")
    step = record.steps[1]
    assert all(c.setting == "lab.wan.queue" for c in step.candidates)
    assert {c.value for c in step.candidates} | {e.value for e in step.excluded} == {
        "fq_codel",
        "cake",
    }
    if not step.candidates:  # this kernel has neither
        assert record.end == "nothing to improve" and len(record.steps) == 2
