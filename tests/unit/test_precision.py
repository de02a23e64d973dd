"""Adaptive repetitions: the pure decision of which configurations need another round.

The goodput sequences are chosen so the bootstrap interval of the median can be worked
out by hand. The interval's ends are the 2.5th and 97.5th percentiles of the medians of
4000 resamples (with replacement), so an end is the extreme value of the data whenever
the chance that a resample's median *is* that value is well above 2.5% (then about
100 of the 4000 resampled medians equal it, and the percentile lands on it).
"""

import pytest

from tunnelbench.analysis.precision import (
    Precision,
    State,
    assess,
    attempts_by_config,
    next_round,
    repetitions_phrase,
)
from tunnelbench.kinds import Order, TunnelKind
from tunnelbench.model.plan import (
    AdaptiveRepetitions,
    Experiment,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
    extra_round_order,
    with_baselines,
)
from tunnelbench.model.records import Resolved, TrialRecord, TrialStatus

M = 1e6  # goodputs in Mbit/s, stored in bit/s
BASE = TrialConfig()
VXLAN = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.VXLAN))
# min 3, max 5, target ±2%.
EXPERIMENT = Experiment(
    configs=(VXLAN,), repetitions=3, adaptive=AdaptiveRepetitions(target_pct=2.0, max_repetitions=5)
)


def _mbit(*values: float | None) -> list[float | None]:
    return [None if v is None else v * M for v in values]


def test_identical_runs_have_a_zero_width_interval_and_meet_any_target():
    # Every resample of [100, 100, 100] has median 100: interval 100..100, ±0%.
    p = assess(EXPERIMENT, _mbit(100, 100, 100))
    assert p == Precision(State.MET, 0.0, runs=3, attempts=3)
    assert p.text() == "target met (±0.0% after 3 runs)"


def test_spread_runs_need_another_round_until_the_maximum_then_are_flagged():
    # [90, 100, 110]: a resample's median is 90 when at least 2 of its 3 draws are 90:
    # 3 * (1/3)^2 * (2/3) + (1/3)^3 = 7/27 = 26% > 2.5%, so the interval's low end is
    # 90; by symmetry its high end is 110. Half-width (110 - 90) / 2 = 10 = 10% of 100.
    p = assess(EXPERIMENT, _mbit(90, 100, 110))
    assert (p.state, p.runs) == (State.MORE, 3)
    assert p.half_width_pct == pytest.approx(10.0)
    assert p.text() == "more runs needed (±10.0% after 3 runs)"
    # Five runs [90, 90, 100, 110, 110], median 100: the median is 90 when at least 3 of 5
    # draws are 90 (p = 2/5): 10 * .4^3 * .6^2 + 5 * .4^4 * .6 + .4^5 = .317 > 2.5%;
    # 110 likewise. Still ±10%, and 5 attempts is the maximum: flagged.
    p = assess(EXPERIMENT, _mbit(90, 100, 110, 90, 110))
    assert (p.state, p.attempts) == (State.NOT_MET, 5)
    assert p.half_width_pct == pytest.approx(10.0)
    assert p.text() == "target not met (±10.0% after 5 runs)"


def test_a_narrow_interval_meets_the_target():
    # [100, 101, 100, 101, 100], median 100: a resample's median is 101 when at least
    # 3 of 5 draws are 101 (p = 2/5): .317 > 2.5% (see above), and 100 with .683. The
    # interval is 100..101: half-width 0.5 = 0.5% of 100, within ±2%.
    p = assess(EXPERIMENT, _mbit(100, 101, 100, 101, 100))
    assert p.state is State.MET
    assert p.half_width_pct == pytest.approx(0.5)


def test_the_minimum_always_runs_even_when_the_target_is_met_early():
    # Two identical runs are ±0%, but the plan asked for at least 3.
    assert assess(EXPERIMENT, _mbit(100, 100)).state is State.MORE


def test_failures_count_toward_the_maximum_but_not_the_interval():
    # Two measured runs of 100 (±0%) and a failure: met, on 2 runs.
    p = assess(EXPERIMENT, _mbit(100, None, 100))
    assert p == Precision(State.MET, 0.0, runs=2, attempts=3)
    assert p.text() == "target met (±0.0% after 2 runs, 1 failed)"
    # A configuration that always fails stops at the maximum (5 attempts), flagged.
    assert assess(EXPERIMENT, _mbit(None, None, None, None)).state is State.MORE
    p = assess(EXPERIMENT, _mbit(None, None, None, None, None))
    assert p == Precision(State.NOT_MET, None, runs=0, attempts=5)
    assert p.text() == "target not met (no interval after 0 runs, 5 failed)"


def test_a_baseline_gets_another_round_only_by_its_own_precision():
    # VXLAN's baseline (no tunnel) is steady; VXLAN is not. Round 4 repeats VXLAN only,
    # numbered after the 6 planned trials (2 configurations x 3).
    attempts = {BASE.key(): _mbit(100, 100, 100), VXLAN.key(): _mbit(90, 100, 110)}
    round_ = next_round(EXPERIMENT, attempts, next_seq=7)
    assert [(t.seq, t.repetition, t.config) for t in round_] == [(7, 4, VXLAN)]
    # The other way round: the baseline alone.
    attempts = {BASE.key(): _mbit(90, 100, 110), VXLAN.key(): _mbit(100, 100, 100)}
    assert [t.config for t in next_round(EXPERIMENT, attempts, next_seq=7)] == [BASE]


def test_a_round_keeps_the_plans_order_and_stops_when_everything_is_done():
    attempts = {BASE.key(): _mbit(90, 100, 110), VXLAN.key(): _mbit(90, 100, 110)}
    round_ = next_round(EXPERIMENT, attempts, next_seq=7)
    assert [(t.seq, t.repetition, t.config) for t in round_] == [(7, 4, BASE), (8, 4, VXLAN)]
    # Met, and reached the maximum: nothing more.
    done = {BASE.key(): _mbit(100, 100, 100), VXLAN.key(): _mbit(90, 100, 110, 90, 110)}
    assert next_round(EXPERIMENT, done, next_seq=9) == []


def test_an_interrupted_round_is_finished_before_the_next_one():
    # Round 4 ran the baseline and was stopped before VXLAN: VXLAN's round 4 comes next,
    # alone, and only then round 5 for both.
    attempts = {BASE.key(): _mbit(90, 100, 110, 95), VXLAN.key(): _mbit(90, 100, 110)}
    round_ = next_round(EXPERIMENT, attempts, next_seq=8)
    assert [(t.seq, t.repetition, t.config) for t in round_] == [(8, 4, VXLAN)]
    attempts[VXLAN.key()] = _mbit(90, 100, 110, 95)
    round_ = next_round(EXPERIMENT, attempts, next_seq=9)
    assert [(t.seq, t.repetition, t.config) for t in round_] == [(9, 5, BASE), (10, 5, VXLAN)]


def test_configurations_that_cannot_run_here_are_never_repeated():
    attempts = {BASE.key(): _mbit(90, 100, 110), VXLAN.key(): _mbit(90, 100, 110)}
    round_ = next_round(EXPERIMENT, attempts, next_seq=7, exclude={VXLAN.key()})
    assert [t.config for t in round_] == [BASE]


def test_shuffled_rounds_follow_the_seed_and_the_round_number_only():
    configs = tuple(
        TrialConfig(tunnel=TunnelSettings(kind=kind), traffic=TrafficSettings(streams=n))
        for kind in (TunnelKind.VXLAN, TunnelKind.WIREGUARD)
        for n in (1, 2, 4)
    )
    experiment = Experiment(
        configs,
        repetitions=3,
        order=Order.SHUFFLED,
        seed=11,
        adaptive=AdaptiveRepetitions(2.0, 10),
    )
    everything = with_baselines(configs)
    assert len(everything) == 9  # 6 tunnels + 3 baselines (one per stream count)
    order4 = extra_round_order(experiment, 4)
    assert sorted(c.key() for c in order4) == sorted(c.key() for c in everything)
    assert order4 == extra_round_order(experiment, 4)  # the same whenever asked
    assert order4 != extra_round_order(experiment, 5)  # each round its own permutation
    # Which configurations need the round does not change the order of those that do.
    spread = _mbit(90, 100, 110)
    needing = [c for i, c in enumerate(everything) if i % 2 == 0]
    attempts = {c.key(): spread if c in needing else _mbit(100, 100, 100) for c in everything}
    round_ = next_round(experiment, attempts, next_seq=28)
    assert [t.config for t in round_] == [c for c in order4 if c in needing]
    assert [t.seq for t in round_] == list(range(28, 28 + len(needing)))


def _record(seq: int, config: TrialConfig, status: str, goodput: float | None) -> TrialRecord:
    return TrialRecord(
        id=seq, run_id=1, seq=seq, repetition=1, config_key=config.key(),
        config=config, resolved=Resolved.from_dict({}), status=TrialStatus(status),
        error=None if status == "ok" else "why",
        metrics={} if goodput is None else {"goodput_bps": goodput},
    )  # fmt: skip


def test_attempts_come_from_stored_trials_and_skipped_configurations_have_none():
    wg = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD, implementation="kernel"))
    trials = [
        _record(4, BASE, "ok", 3e9),
        _record(1, BASE, "ok", 1e9),
        _record(2, VXLAN, "failed", None),
        _record(3, wg, "skipped", None),
        _record(5, VXLAN, "ok", 2e9),
    ]
    assert attempts_by_config(trials) == {BASE.key(): [1e9, 3e9], VXLAN.key(): [None, 2e9]}


def test_repetitions_in_words():
    assert repetitions_phrase(EXPERIMENT) == (
        "3-5 repetitions, until the median's 95% interval is within ±2%"
    )
    assert repetitions_phrase(Experiment((BASE,), repetitions=1)) == "1 repetition"


def test_precision_round_trips_through_its_stored_form():
    p = Precision(State.NOT_MET, 3.4, runs=9, attempts=10)
    assert Precision.from_dict(p.to_dict()) == p
    assert p.text() == "target not met (±3.4% after 9 runs, 1 failed)"
