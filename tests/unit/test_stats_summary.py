"""Statistics and per-configuration summaries on stored trial records."""

import pytest

from tests.report_fixtures import resolved_for
from tunnelbench.analysis.stats import summarize
from tunnelbench.analysis.summary import summarize_run, varying_axes
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import TrialConfig, TunnelSettings
from tunnelbench.model.records import TrialRecord, TrialStatus


def test_summarize():
    s = summarize([10.0, 12.0, 11.0, 30.0])
    assert s is not None
    assert (s.n, s.median, s.minimum, s.maximum) == (4, 11.5, 10.0, 30.0)
    assert s.mean == pytest.approx(15.75)
    # squared deviations from 15.75: 33.0625 + 14.0625 + 22.5625 + 203.0625 = 272.75
    assert s.cv == pytest.approx((272.75 / 3) ** 0.5 / 15.75)
    assert summarize([5.0]).cv is None  # type: ignore[union-attr]
    assert summarize([]) is None


def _trial(seq: int, config: TrialConfig, goodput: float, status: str = "ok") -> TrialRecord:
    metrics = {} if status != "ok" else {
        "goodput_bps": goodput, "retransmits": 3.0,
        "cpu0.user": 10.0, "cpu0.system": 20.0, "cpu0.softirq": 5.0, "cpu0.idle": 65.0,
        "cpu1.user": 50.0, "cpu1.system": 30.0, "cpu1.softirq": 10.0, "cpu1.idle": 10.0,
        "proc.wireguard-go@client": 95.0,
    }  # fmt: skip
    return TrialRecord(
        id=seq, run_id=1, seq=seq, repetition=seq, config_key=config.key(),
        config=config,
        resolved=resolved_for(config, {"tunnel_implementation": "wireguard-go"}),
        status=TrialStatus(status), error=None if status == "ok" else "boom", metrics=metrics,
    )  # fmt: skip


def test_percent_of_baseline_and_busiest_core():
    base = TrialConfig()
    wg = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD))
    trials = [
        _trial(1, base, 10e9), _trial(2, wg, 2e9), _trial(3, base, 12e9),
        _trial(4, wg, 3e9), _trial(5, base, 11e9), _trial(6, wg, 0, status=TrialStatus.FAILED),
    ]  # fmt: skip
    none_summary, wg_summary = summarize_run(trials)
    assert none_summary.pct_of_baseline == 100.0
    assert wg_summary.goodput is not None and wg_summary.goodput.n == 2
    assert wg_summary.goodput.median == 2.5e9
    assert wg_summary.pct_of_baseline == pytest.approx(100 * 2.5 / 11)
    assert len(wg_summary.failed) == 1
    core = wg_summary.busiest_core
    assert core is not None and (core.core, core.busy, core.user) == (1, 90.0, 50.0)
    assert wg_summary.processes_cpu == {"wireguard-go@client": 95.0}
    assert wg_summary.label == "wireguard (wireguard-go)"
    assert varying_axes([none_summary, wg_summary]) == ["tunnel.kind"]


def test_a_tunnel_without_a_measured_baseline_has_no_percentage():
    wg = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD))
    (only,) = summarize_run([_trial(1, wg, 1e9)])
    assert only.pct_of_baseline is None


def test_median_ci_covers_the_true_median_of_a_known_distribution():
    import random

    from tunnelbench.analysis.stats import median_ci

    # Normal(100, 10): the population median is 100. A 95% interval from 15 draws must
    # contain it in roughly 95% of 200 independent samples (binomial 2-sigma: >= 88%).
    rng = random.Random(7)
    covered = 0
    for _ in range(200):
        sample = [rng.gauss(100.0, 10.0) for _ in range(15)]
        low, high = median_ci(sample, resamples=1000)  # type: ignore[misc]
        covered += low <= 100.0 <= high
    assert 176 <= covered <= 200


def test_median_ci_is_reproducible_and_inside_the_range():
    from tunnelbench.analysis.stats import median_ci

    values = [2366.0, 2344.0, 2388.0, 2401.0, 2350.0]
    assert median_ci(values) == median_ci(list(reversed(values)))
    low, high = median_ci(values)  # type: ignore[misc]
    assert 2344.0 <= low <= 2366.0 <= high <= 2401.0
    assert median_ci([5.0]) is None
    assert median_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    s = summarize(values)
    assert s is not None and s.ci_half_width_pct == pytest.approx(100 * (high - low) / 2 / 2366.0)


def test_terminal_table_shows_the_median_interval_and_consistency(tmp_path):
    from tests.report_fixtures import recorded
    from tunnelbench.report import table

    store = recorded("l2-tunnel-mtu", tmp_path)
    lines = table.render(summarize_run(store.trials(1))).splitlines()
    assert "median Mbit/s (95% CI)  consistency" in lines[0]
    # none at LAN MTU 1500: median 13,304, interval 12,420-14,262 (the range, as with
    # any 3 runs), CV 6.9% (see test_json_schema): variable.
    assert "13,304 (12,420-14,262)  variable" in lines[2]
    assert max(len(line) for line in lines) <= 120
