"""This machine's noise: the baselines' CV as the floor a difference must beat, trials
flagged for steal time or outside load, the steal verdict, and advice and `compare`
saying "within this machine's noise" instead of calling a winner.

The runs here are hand-made (not measurements): goodputs chosen so that each CV and
each rank test can be worked out by hand.
"""

import statistics
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from tunnelbench.analysis import noise
from tunnelbench.analysis.advice import Measured
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose, steal
from tunnelbench.analysis.significance import compare as rank_compare
from tunnelbench.analysis.summary import summarize_run
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, TrafficSettings, TrialConfig, TunnelSettings
from tunnelbench.model.records import Resolved, RunRecord, RunStatus, TrialRecord, TrialStatus
from tunnelbench.report import compare

BASE = TrialConfig()
WG = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD))
BASE_4 = TrialConfig(traffic=TrafficSettings(streams=4))
WG_4 = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD), traffic=BASE_4.traffic)


def trial(
    seq: int,
    config: TrialConfig,
    mbit_s: float,
    status: TrialStatus = TrialStatus.OK,
) -> TrialRecord:
    return TrialRecord(
        id=seq, run_id=1, seq=seq, repetition=seq, config_key=config.key(),
        config=config, resolved=Resolved.from_dict({}), status=status, error=None,
        metrics={"goodput_bps": mbit_s * 1e6},
    )  # fmt: skip


def stolen(
    seq: int,
    config: TrialConfig,
    mbit_s: float,
    extra: dict[str, float],
    status: TrialStatus = TrialStatus.OK,
) -> TrialRecord:
    made = trial(seq, config, mbit_s, status)
    return replace(made, metrics=made.metrics | extra)


def cv(values: Sequence[float]) -> float:
    return 100 * statistics.stdev(values) / statistics.mean(values)


BASE_RUNS = [1000.0, 1100.0, 900.0, 1050.0, 950.0]  # CV 7.9%
BASE_4_RUNS = [2000.0, 2010.0, 1990.0]  # CV 0.5%


def run_trials() -> list[TrialRecord]:
    trials = [trial(1 + i, BASE, v) for i, v in enumerate(BASE_RUNS)]
    trials += [trial(10 + i, WG, v) for i, v in enumerate([500, 510, 490, 505, 495])]
    trials += [trial(20 + i, BASE_4, v) for i, v in enumerate(BASE_4_RUNS)]
    trials += [trial(30 + i, WG_4, v) for i, v in enumerate([700, 690])]
    return trials


def test_each_configuration_is_held_against_its_own_baselines_cv():
    by_key = {s.key: s for s in summarize_run(run_trials())}
    assert by_key[BASE.key()].noise_pct == pytest.approx(cv(BASE_RUNS))
    assert by_key[WG.key()].noise_pct == pytest.approx(cv(BASE_RUNS))  # 7.9%, not its own 1.6%
    assert by_key[WG_4.key()].noise_pct == pytest.approx(cv(BASE_4_RUNS))
    assert by_key[BASE_4.key()].noise_pct == pytest.approx(0.5, abs=0.01)


def test_a_baseline_with_fewer_than_three_runs_gives_no_floor():
    trials = [trial(1, BASE, 1000.0), trial(2, BASE, 1100.0), trial(3, WG, 500.0)]
    trials.append(trial(4, BASE, 0.0, TrialStatus.FAILED))  # a failure adds no run
    summaries = summarize_run(trials)
    assert [s.noise_pct for s in summaries] == [None, None]
    found = noise.measure([(s.key, s.label, s.goodput, True) for s in summaries], trials)
    assert found.floor_pct is None and found.lines() == []


def test_the_floor_is_the_largest_baseline_cv_and_names_it():
    summaries = summarize_run(run_trials())
    named = [(s.key, s.label, s.goodput, s.baseline_key is None) for s in summaries]
    found = noise.measure(named, run_trials())
    assert [b.key for b in found.baselines] == [BASE.key(), BASE_4.key()]  # tunnels are not
    assert found.floor_pct == pytest.approx(cv(BASE_RUNS))
    (line,) = found.lines()
    assert line.startswith("noise floor: CV 7.9% (none, 5 runs; other baselines: none: CV 0.5%")
    assert line.endswith(
        "over 3 runs). A difference smaller than its configuration's baseline"
        " CV is within this machine's noise."
    )
    assert found.lines(terse=True) == [line]  # one other baseline is named, not a range
    three = noise.Noise((*found.baselines, noise.Baseline("k", "none, limit 64", 5, 2.0)), ())
    assert "(none, 5 runs; 2 other baselines: CV 0.5-2.0%)" in three.lines(terse=True)[0]
    assert found.to_dict()["baselines"][1] == {
        "config_key": BASE_4.key(), "name": "none", "runs": 3,
        "cv_pct": pytest.approx(cv(BASE_4_RUNS)),
    }  # fmt: skip


def test_trials_with_steal_or_outside_load_are_flagged_in_order():
    trials = [
        stolen(3, WG, 500.0, {"cpu0.steal": 0.4, "cpu1.steal": 2.26}),
        stolen(1, BASE, 1000.0, {"cpu0.steal": 0.9, "load.outside_pct": 9.9}),  # both below
        stolen(2, BASE, 1000.0, {"load.outside_pct": 45.0, "cpu1.steal": 1.0}),
        stolen(4, WG, 0.0, {"cpu1.steal": 50.0}, TrialStatus.FAILED),  # measured nothing
    ]
    found = noise.measure([(WG.key(), "wireguard", None, False)], trials)
    assert [(d.seq, d.what) for d in found.disturbed] == [
        (2, ("steal 1.0% of cpu1", "outside processes 45% of a core")),
        (3, ("steal 2.3% of cpu1",)),
    ]
    assert found.disturbed[1].text() == "trial 3 (wireguard): steal 2.3% of cpu1"
    assert found.disturbed[0].name == BASE.key()  # a configuration not named: its key
    assert found.lines()[-1].startswith("disturbed: 2 trial(s): trial 2 (")


def test_the_terminal_folds_many_disturbed_trials_into_one_line():
    """A run with 11 disturbed trials printed 11 lines of prose at 80 columns, ahead of
    the RTT column; the terminal now counts them in one line, the reports keep each."""
    what = ("not steady: loaded RTT rose 64.0 → 95.0 ms across the window",)
    many = tuple(
        noise.Disturbed(seq, "k", "none", what if seq % 3 else ("steal 2.3% of cpu1",))
        for seq in range(1, 12)
    )
    found = noise.Noise((), many)
    (line,) = found.lines(terse=True)
    assert line == (
        "disturbed: 11 trial(s) (1, 2, 3, 4, 5, 6, 7, 8, …): not steady (8), steal (3);"
        " the reports give the figures"
    )
    assert found.lines()[0].count("trial ") == 11  # the reports: each in full
    two = noise.Noise((), many[:2])
    assert two.lines(terse=True) == two.lines()  # a couple are listed in full


def subject(*runs: dict[str, float]) -> Subject:
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return Subject(WG, Resolved.from_dict({}), medians, runs=runs)


def test_steal_is_judged_by_the_worst_run_and_outranks_the_cpu_only_when_heavy():
    quiet = {"goodput_bps": 5e8, "cpu0.idle": 50.0, "cpu0.steal": 0.0, "cpu1.steal": 0.2}
    stolen = quiet | {"cpu1.steal": 3.5}
    assert steal(subject(quiet, quiet, quiet)) is None
    assert steal(subject(quiet | {"cpu1.steal": 0.99}, quiet)) is None
    found = steal(subject(quiet, stolen, quiet))
    assert found is not None and found.subject == "cpu1"
    assert "up to 3.5% of cpu1 in 1 of 3 runs" in found.summary
    assert [(e.name, e.value) for e in found.evidence] == [
        ("cpu1 steal, worst run", 3.5),
        ("runs with steal", 1),
    ]
    # Heavy steal is judged ahead of the CPU verdicts; a little is told after them, since
    # it cannot change which resource is the limit (CI saw 1.1% outrank a saturated core).
    busy = {"goodput_bps": 5e8, "cpu0.idle": 0.0, "cpu0.user": 10.0, "cpu0.system": 90.0,
            "cpu0.softirq": 0.0, "cpu0.steal": 5.0}  # fmt: skip
    assert diagnose(subject(busy, busy, busy)).verdict.bound is Bound.STEAL
    little = diagnose(subject(*(busy | {"cpu0.steal": pct} for pct in (1.0, 4.9, 0.0))))
    assert little.verdict.bound is Bound.CPU
    assert [f.bound for f in little.others] == [Bound.STEAL]
    assert "up to 4.9% of cpu0 in 2 of 3 runs" in little.others[0].summary
    assert steal(subject({"goodput_bps": 5e8})) is None  # recorded before steal was


def measured(here: Sequence[float], there: Sequence[float], noise_pct: float | None) -> Measured:
    a, b = statistics.median(here), statistics.median(there)
    return Measured(
        "tunnel.mtu",
        1280,
        b * 1e6,
        100 * (b / a - 1),
        a * 1e6,
        rank_compare(here, there),
        noise_pct,
    )


def test_advice_says_a_difference_inside_the_noise_is_inside_it():
    here, there = [1000, 1100, 900, 1050, 950], [980, 1080, 880, 1030, 930]  # -2%, p = 0.69
    m = measured(here, there, 7.9)
    assert m.outcome == "no difference" and m.in_noise
    assert m.brief() == "tunnel.mtu = 1280: -2%, within this machine's noise (CV 7.9%)"
    assert m.text().endswith(
        "p = 0.69); the -2.0% is smaller than this machine's noise (CV 7.9% of the baseline's runs)"
    )
    quiet = measured(here, there, 1.0)  # the same runs on a quiet machine: no such claim
    assert not quiet.in_noise and "noise" not in quiet.text() + quiet.brief()
    assert "noise" not in measured(here, there, None).text()  # no floor measured


def test_a_significant_difference_smaller_than_one_runs_noise_says_so():
    here, there = [1000, 1001, 1002, 1003, 1004], [1040, 1041, 1042, 1043, 1044]  # +4%
    m = measured(here, there, 7.9)
    assert m.outcome == "gain"  # the rank test decides; the note only qualifies it
    assert m.text().endswith(
        ": gain (smaller than one run's noise, CV 7.9%: shown by 5 and 5 runs)"
    )


def side(trials: list[TrialRecord], kind: TunnelKind) -> compare.Side:
    run = RunRecord(id=1, started_at=0.0, ended_at=1.0, status=RunStatus.COMPLETE,
                    command_line="", experiment=Experiment(()),
                    environment=Environment())  # fmt: skip
    summaries = [s for s in summarize_run(trials) if s.config.tunnel.kind is kind]
    return compare.Side(Path("x.db"), run, summaries)


def test_compare_marks_pairs_within_the_larger_noise_of_the_two_runs():
    a_trials = [trial(1 + i, BASE, v) for i, v in enumerate(BASE_RUNS)]
    a_trials += [trial(10 + i, WG, v) for i, v in enumerate([500, 520, 480, 510, 490])]
    b_trials = [trial(1 + i, BASE, v) for i, v in enumerate([1000, 1001, 999, 1002, 998])]
    b_trials += [trial(10 + i, WG, v) for i, v in enumerate([505, 525, 485, 515, 495])]  # +1%
    (row,) = compare.compare(
        side(a_trials, TunnelKind.WIREGUARD), side(b_trials, TunnelKind.WIREGUARD)
    ).rows
    assert row.noise_pct == pytest.approx(cv(BASE_RUNS))  # A's 7.9%, not B's 0.2%
    assert row.in_noise
    # The whole interval of the +1% lies within the 7.9%: the one case called no difference.
    assert row.equivalent
    assert compare.short_verdict(row) == "no difference (CI within ±7.9%)"
    assert row.verdict.startswith("no difference: the 95% CI ")
    assert row.verdict.endswith(
        " lies within this machine's noise (± CV 7.9% of the baseline), p = 0.69"
    )
    json_row = compare._row_json(row)
    assert json_row["noise_pct"] == pytest.approx(7.9, abs=0.05) and "noise" in json_row["verdict"]
    comparison = compare.compare(
        side(a_trials, TunnelKind.WIREGUARD), side(b_trials, TunnelKind.WIREGUARD)
    )
    assert any(line.startswith("No difference:") for line in compare.explanation(comparison))
