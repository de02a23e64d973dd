"""A tuning session's decisions, candidates and records, on real recorded runs and on
goodput figures of the shape this machine measures (link-bound: tight; CPU-bound: ~10%
run to run). The sessions themselves run in tests/integration/test_tune.py."""

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.report_fixtures import recorded
from tunnelbench.analysis import tuning
from tunnelbench.analysis.advice import advise
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose, medians
from tunnelbench.analysis.summary import summarize_run
from tunnelbench.bench import planfile
from tunnelbench.errors import UserError
from tunnelbench.kinds import Queue, StreamMode, TunnelKind
from tunnelbench.model.plan import TrialConfig, flatten
from tunnelbench.model.tuning import (
    Candidate,
    End,
    Excluded,
    Outcome,
    Step,
    Target,
    TuneRecord,
    plain,
    plan_snippet,
)

MBIT = 1e6


def runs(values: Sequence[float], p95: Sequence[float] | None = None) -> list[dict[str, float]]:
    out = [{"goodput_bps": v * MBIT} for v in values]
    for run, latency in zip(out, p95 or [], strict=False):
        run["rtt.loaded_p95_ms"] = latency
    return out


def candidate(setting: str = "lab.wan.queue_limit", value: object = 64) -> Candidate:
    return Candidate(setting, value, "key", {}, "raise it")


def judged(
    best: list[dict[str, float]],
    mine: list[dict[str, float]],
    *,
    target: Target = Target.THROUGHPUT,
    alpha: float = 0.05,
    need: int = 4,
    max_runs: int = 10,
    gain: float = 2.0,
) -> Candidate:
    return tuning.judge(
        candidate(),
        best,
        mine,
        target=target,
        alpha=alpha,
        need=need,
        max_runs=max_runs,
        min_gain_pct=gain,
    )


def test_the_level_is_divided_among_a_steps_candidates_and_sets_the_runs_needed():
    assert [tuning.step_level(k) for k in (1, 2, 4)] == [0.05, 0.025, 0.0125]
    # 4 runs a side reach 2/70 = 0.029 < 0.05; with two candidates it takes 5 (2/252).
    assert [tuning.runs_needed(k) for k in (1, 2, 3, 4, 8)] == [4, 5, 5, 5, 6]


def test_a_clear_gain_is_better_with_its_interval_and_p():
    c = judged(runs([73, 70, 76, 72, 74]), runs([94, 93, 95, 92, 96]), alpha=0.025, need=5)
    assert c.outcome is Outcome.BETTER
    assert c.p is not None and c.p < 0.025
    assert c.ratio_ci is not None and c.ratio_ci[0] > 1
    assert c.change_pct == pytest.approx(100 * (94 / 73 - 1))
    assert (c.runs, c.best_runs) == (5, 5)


def test_no_verdict_on_fewer_runs_than_the_test_needs_however_large_the_gain():
    c = judged(runs([70, 71, 72, 73]), runs([140, 141, 142, 143]), alpha=0.025, need=5)
    assert c.outcome is Outcome.UNDECIDED
    assert c.p is None  # not even computed: 4 a side cannot reach 0.025


def test_a_significant_loss_is_worse():
    c = judged(runs([96, 95, 96, 97]), runs([80, 81, 79, 82]))
    assert c.outcome is Outcome.WORSE


def test_a_significant_gain_under_the_minimum_is_too_small():
    # Link-bound figures are exact to 0.1%: +0.5% is significant, and worth nothing.
    c = judged(runs([95.6, 95.61, 95.62, 95.6]), runs([96.1, 96.1, 96.12, 96.11]))
    assert c.outcome is Outcome.TOO_SMALL
    assert "below the minimum gain of 2%" in c.note
    assert judged(runs([95.6, 95.61, 95.62, 95.6]), runs([96.1, 96.1, 96.12, 96.11]), gain=0)


def test_an_interval_within_the_minimum_gain_is_no_difference_before_the_most_runs():
    c = judged(runs([95.6, 95.7, 95.5, 95.6]), runs([95.7, 95.5, 95.6, 95.6]))
    assert c.outcome is Outcome.NO_DIFFERENCE
    assert c.note == "95% CI within ±2%"


def test_overlapping_noisy_runs_stay_undecided_until_the_most_runs():
    best = [2200, 2450, 2100, 2390, 2300]
    mine = [2380, 2150, 2460, 2230, 2310]
    assert judged(runs(best), runs(mine), max_runs=6).outcome is Outcome.UNDECIDED
    c = judged(runs(best), runs(mine), max_runs=5)
    assert c.outcome is Outcome.NOT_DECIDED
    assert c.note.startswith(
        "neither a difference nor equivalence within ±2% shown after 5 runs each (p = "
    )


def test_a_loss_short_of_the_steps_level_at_the_most_runs_is_not_decided_not_equal():
    """-7%, 95% CI -13..+0%, p = 0.034 after 10 runs a side, at the level of a step of
    four candidates (0.0125): neither a difference nor equivalence was shown, and "no
    difference" read as "they are equal" (a session said so of -10%, CI -17..+1%,
    p = 0.029)."""
    best = [2540, 2480, 2610, 2390, 2555, 2300, 2470, 2600, 2420, 2510]
    mine = [2250, 2400, 2190, 2520, 2300, 2150, 2480, 2350, 2050, 2590]
    c = judged(runs(best), runs(mine), alpha=0.0125, need=5, max_runs=10)
    assert c.outcome is Outcome.NOT_DECIDED and str(c.outcome) == "not decided"
    assert c.p is not None and 0.0125 < c.p < 0.05
    assert c.ratio_ci is not None and c.ratio_ci[0] < 0.98 < 1 < c.ratio_ci[1]
    step = Step(1, "best", plain(TrialConfig()), 5)
    text = tuning.describe(step, c, Target.THROUGHPUT)
    assert text.endswith(
        ": not decided (neither a difference nor equivalence within ±2% shown after 10 runs"
        " each (p = 0.034, level 0.0125))"
    ), text
    assert "no difference" not in text


def test_latency_is_better_when_lower():
    best = runs([95] * 4, p95=[21.0, 22.0, 20.5, 21.5])
    mine = runs([95] * 4, p95=[4.0, 4.2, 3.9, 4.1])
    c = judged(best, mine, target=Target.LATENCY)
    assert c.outcome is Outcome.BETTER
    assert c.median == pytest.approx(4.05) and c.best_median == pytest.approx(21.25)
    assert judged(mine, best, target=Target.LATENCY).outcome is Outcome.WORSE


def test_throughput_keeping_latency_refuses_a_gain_that_lengthens_the_loaded_round_trip():
    best = runs([93, 92, 94, 93], p95=[4.4, 4.5, 4.3, 4.6])
    bloated = runs([96, 96, 96, 96.1], p95=[47.0, 46.5, 48.0, 47.2])
    c = judged(best, bloated, target=Target.THROUGHPUT_KEEPING_LATENCY)
    assert c.outcome is Outcome.LATENCY
    assert c.note.startswith("loaded RTT p95 4.5 → 47.1 ms (p = ")
    assert judged(best, bloated).outcome is Outcome.BETTER  # throughput alone keeps it
    steady = runs([96, 96, 96, 96.1], p95=[4.5, 4.4, 4.6, 4.3])
    kept = judged(best, steady, target=Target.THROUGHPUT_KEEPING_LATENCY)
    assert kept.outcome is Outcome.BETTER


def test_the_winner_is_the_better_candidate_that_improves_the_target_most():
    a, b, c = candidate(value=16), candidate(value=64), candidate(value=256)
    a.outcome, a.median = Outcome.BETTER, 94e6
    b.outcome, b.median = Outcome.BETTER, 92e6
    c.outcome, c.median = Outcome.NO_DIFFERENCE, 99e6
    assert tuning.winner([a, b, c], Target.THROUGHPUT, 1.0) is a
    a.median, b.median = 4.7, 15.7  # as loaded round trips
    assert tuning.winner([a, b, c], Target.LATENCY, 1.0) is a
    assert tuning.winner([c], Target.THROUGHPUT, 1.0) is None


def test_a_tie_within_the_minimum_gain_goes_to_the_shorter_loaded_round_trip():
    """The tiny-FIFO session: 16 and 64 packets both gave 93 Mbit/s, at 5.0 and 13.9 ms."""
    small, large = candidate(value=16), candidate(value=64)
    small.outcome, small.median, small.loaded_p95_ms = Outcome.BETTER, 92.6e6, [0.4, 5.0]
    large.outcome, large.median, large.loaded_p95_ms = Outcome.BETTER, 93.4e6, [0.4, 13.9]
    assert tuning.winner([large, small], Target.THROUGHPUT, 2.0) is small
    assert tuning.winner([large, small], Target.THROUGHPUT, 0.5) is large  # not a tie


def test_proposals_are_the_advices_values_once_each_without_refuted_advice(tmp_path: Path):
    """streams-5-runs.db: wireguard-go CPU-bound, and 1 vs 4 streams measured; the small
    FIFO of window-retransmits.db: a queue of 5 packets dropping, for one flow."""
    store = recorded("streams-5-runs", tmp_path)
    run = store.run("latest")
    summaries = {
        (s.config.tunnel.kind, s.config.traffic.streams): s
        for s in summarize_run(store.trials(run.id), run.environment)
    }
    one = summaries[(TunnelKind.WIREGUARD, 1)]
    flat = flatten(one.config.to_dict())
    # "several flows" was measured in this run and refuted (no difference at 4 streams).
    assert any(a.setting == "traffic.streams" and a.refuted for a in one.advice)
    found = [(p.setting, p.value) for p in tuning.proposals(one.advice, flat, Target.THROUGHPUT)]
    assert found == [("tunnel.implementation", "kernel")]
    baseline = summaries[(TunnelKind.NONE, 1)]
    found = [(p.setting, p.value) for p in tuning.proposals(baseline.advice, {}, Target.THROUGHPUT)]
    assert found == [("traffic.streams", 2), ("traffic.streams", 4)]
    # A value the configuration already has is no change.
    assert (
        tuning.proposals(baseline.advice, {"traffic.streams": 2}, Target.THROUGHPUT)[0].value == 4
    )

    store = recorded("window-retransmits", tmp_path)
    run = store.run("latest")
    fifo = next(
        s
        for s in summarize_run(store.trials(run.id), run.environment)
        if s.config.lab.wan.queue_limit == 5
    )
    found = [(p.setting, p.value) for p in tuning.proposals(fifo.advice, {}, Target.THROUGHPUT)]
    # 5 packets hold the 4 segments one flow needs over a 0.04 ms round trip (and its
    # bandwidth-delay product, 0.5 kB), yet the queue dropped 53% of what it was offered
    # and held the link at 68% of its ceiling: too small all the same, and its limit is
    # tried beside the fair queues (which this kernel lacks: docs/diagnosis.md, a
    # queue's size).
    assert found == [
        ("lab.wan.queue", "fq_codel"),
        ("lab.wan.queue", "cake"),
        ("lab.wan.queue_limit", 20),
        ("lab.wan.queue_limit", 80),
    ]


def test_a_derived_configuration_is_checked_and_normalized_as_a_plans():
    start = TrialConfig()
    derived = planfile.derive(start, {"lab.wan.queue_limit": 64, "lab.wan.queue": "pfifo"})
    assert (derived.lab.wan.queue_limit, derived.lab.wan.queue) == (64, Queue.PFIFO)
    # One stream needs no stream mode: the same configuration as the start.
    assert planfile.derive(start, {"traffic.stream_mode": "processes"}).key() == start.key()
    wireguard = planfile.derive(start, {"tunnel.kind": "wireguard"})
    with pytest.raises(UserError, match=r"tunnel\.implementation: 'nope' is not an implementation"):
        planfile.derive(wireguard, {"tunnel.implementation": "nope"})
    budget = planfile.derive(wireguard, {"tunnel.cpu_budget": 0.1})
    assert planfile.derive(budget, {"tunnel.cpu_budget": None}).tunnel.cpu_budget is None


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"lab.wan.rate": 100_000_000, "lab.wan.queue": "pfifo", "lab.wan.queue_limit": 4},
        {"tunnel.kind": "wireguard", "tunnel.cpu_budget": 0.1, "traffic.streams": 4},
        {"traffic.streams": 4, "traffic.stream_mode": StreamMode.PROCESSES.value},
        {"lab.lan_mtu": 65535, "lab.wan.mtu": 65535, "lab.offloads.gro": False},
        {"lab.offloads.roles": ("gw",), "lab.offloads.tso": True, "lab.rps_cpus": "3"},
    ],
)
def test_the_final_plan_snippet_runs_the_same_configuration(changes):
    config = planfile.derive(TrialConfig(), changes)
    snippet = plan_snippet(config)
    (parsed,) = planfile.parse(snippet, "snippet").experiment.configs
    assert parsed.key() == config.key(), snippet


def test_the_record_survives_the_store_as_json():
    step = Step(
        1,
        "best",
        plain(TrialConfig()),
        5,
        diagnosis="queue drops",
        candidates=[candidate()],
        excluded=[Excluded("lab.wan.queue", "cake", "cake is not available")],
        alpha=0.025,
        runs_needed=5,
        winner="key",
        done=True,
        best_median=73e6,
        best_runs=5,
    )
    step.candidates[0].outcome = Outcome.BETTER
    record = TuneRecord(Target.LATENCY, 900.0, 10, 2.0, 8, 7, [step], 61.5, End.NOTHING_HELPED)
    again = TuneRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record
    assert again.kept() == [(step, step.candidates[0])]


def test_a_candidate_is_described_with_its_effect_and_verdict():
    step = Step(1, "best", plain(planfile.derive(TrialConfig(), {"lab.wan.queue_limit": 4})), 5)
    c = judged(runs([73, 70, 76, 72, 74]), runs([94, 93, 95, 92, 96]), alpha=0.025, need=5)
    c.loaded_p95_ms = [0.9, 4.7]
    text = tuning.describe(step, c, Target.THROUGHPUT)
    assert text.startswith("lab.wan.queue_limit 4 → 64: 73 Mbit/s → 94 Mbit/s (+29%, 95% CI +")
    assert text.endswith(", 5 vs 5 runs), loaded RTT p95 0.90 → 4.7 ms: better")
    c.outcome = Outcome.UNDECIDED
    assert tuning.describe(step, c, Target.THROUGHPUT, End.BUDGET).endswith(
        ": undecided: the budget ended first"
    )
    assert tuning.describe(step, c, Target.THROUGHPUT).endswith(  # interrupted, say
        ": undecided: not measured to a verdict"
    )


def test_a_change_below_one_percent_keeps_its_sign_and_a_decimal():
    """tune printed "+0%" and "-0%" for -0.3%: a figure that says nothing."""
    assert [tuning.signed_pct(v) for v in (29.4, -0.3, 0.04, 0.0, -1.0, -0.96)] == [
        "+29%",
        "-0.3%",
        "+0.0%",
        "0%",
        "-1%",
        "-1.0%",
    ]


def test_a_bloated_fifo_is_advised_shorter_for_the_latency_target_only(tmp_path: Path):
    """The recorded 1-stream baseline of streams-5-runs.db, put behind a 10 Mbit/s FIFO of
    1000 packets whose loaded round trip is 120 ms (a bufferbloat finding)."""
    store = recorded("streams-5-runs", tmp_path)
    run = store.run("latest")
    s = next(
        s
        for s in summarize_run(store.trials(run.id), run.environment)
        if s.config.tunnel.kind is TunnelKind.NONE and s.config.traffic.streams == 1
    )
    shaped = planfile.derive(
        s.config,
        {"lab.wan.rate": 10_000_000, "lab.wan.queue": "pfifo", "lab.wan.queue_limit": 1000},
    )
    bloated = tuple(
        t.metrics | {"rtt.idle_ms": 0.05, "rtt.loaded_ms": 120.0, "rtt.loaded_p95_ms": 131.0}
        for t in s.trials
    )
    subject = Subject(shaped, s.resolved, medians(bloated), None, run.environment, runs=bloated)
    diagnosis = diagnose(subject)
    assert Bound.LATENCY in {f.bound for f in diagnosis.findings}
    advice = advise(subject, diagnosis, [])
    (shorter,) = [a for a in advice if a.goal == "latency"]
    assert shorter.setting == "lab.wan.queue_limit" and shorter.candidates == (250, 62)
    assert shorter.suggestion == (
        "shorten the queue: 1000 packets of up to 1500 bytes wait up to 1,200 ms at 10 Mbit/s"
    )
    assert shorter.measured is None  # a goodput comparison cannot judge a latency advice
    flat = flatten(shaped.to_dict())
    latency = [(p.setting, p.value) for p in tuning.proposals(advice, flat, Target.LATENCY)]
    assert latency == [
        ("lab.wan.queue", "fq_codel"),
        ("lab.wan.queue", "cake"),
        ("lab.wan.queue_limit", 250),
        ("lab.wan.queue_limit", 62),
    ]
    throughput = tuning.proposals(advice, flat, Target.THROUGHPUT)
    assert ("lab.wan.queue_limit", 250) not in [(p.setting, p.value) for p in throughput]


def test_a_latency_gain_that_costs_goodput_is_not_kept():
    best = runs([95, 95.2, 94.9, 95.1], p95=[21.0, 22.0, 20.5, 21.5])
    starved = runs([60, 61, 59, 60.5], p95=[3.0, 3.1, 2.9, 3.2])
    c = judged(best, starved, target=Target.LATENCY)
    assert c.outcome is Outcome.LOST_THROUGHPUT
    assert c.note.startswith("goodput 95 → 60 Mbit/s (p = ")


def test_a_machine_busy_throughout_is_diagnosed_on_every_run_after_twice_the_runs(
    tmp_path: Path,
):
    """timeline.db: wireguard-go's three runs all had outside processes at 52-79% of a
    core. No clean run is left to diagnose on, so every run is (the verdict then names
    the load), and the start stops being measured again at twice its runs."""
    store = recorded("timeline", tmp_path)
    run = store.run("latest")
    wireguard = [t for t in store.trials(run.id) if t.config["tunnel"]["kind"] == "wireguard"]
    assert [tuning.disturbed(t.metrics) for t in wireguard] == [
        ("outside processes 52% of a core",),
        ("outside processes 71% of a core",),
        ("outside processes 79% of a core",),
    ]
    assert tuning.for_diagnosis(wireguard) == (wireguard, [])
    assert not tuning.start_measured(wireguard * 2, 4, 10)  # 6 runs
    assert tuning.start_measured(wireguard * 3, 4, 10)  # 9: twice the 4 it needs
    assert tuning.start_measured(wireguard * 2, 4, 5)  # 6: more than --max-runs 5
