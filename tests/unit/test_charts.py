"""The chart model built from the recorded runs (golden), and what each chart must show.

The golden file holds every chart of both recorded runs with values rounded to 0.1; the
tests below check the same charts against the analysis summaries and the stored trials
independently, so a golden file regenerated from a wrong model would not pass them.
Regenerate it with ``TB_UPDATE_GOLDEN=1 pytest tests/unit/test_charts.py``.
"""

import dataclasses
import json
import os
import statistics
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tests.report_fixtures import RECORDED, recorded, wide
from tunnelbench.analysis.summary import summarize_run
from tunnelbench.report.charts import MAX_CPU_ROWS, Chart, charts_for_run, config_labels

GOLDEN = FIXTURES / "golden" / "charts.json"


def _charts(store) -> tuple[list, dict[str, Chart]]:
    summaries = summarize_run(store.trials(store.run("latest").id))
    return summaries, {c.id: c for c in charts_for_run(summaries)}


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 1)
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def test_charts_match_golden(tmp_path):
    got = {}
    for name in RECORDED:
        _, charts = _charts(recorded(name, tmp_path))
        got[name] = [_rounded(dataclasses.asdict(c)) for c in charts.values()]
    if os.environ.get("TB_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    assert got == json.loads(GOLDEN.read_text())


def test_which_charts_a_run_gets(tmp_path):
    """Streams and MTU charts only when those settings vary in the run."""
    _, l2 = _charts(recorded("l2-tunnel-mtu", tmp_path))
    assert list(l2) == ["throughput", "runs", "mtu", "cpu", "losses"]
    _, queue = _charts(recorded("queue-comparison", tmp_path))
    assert list(queue) == ["throughput", "runs", "cpu", "losses"]
    _, many = _charts(wide(tmp_path))
    assert list(many) == ["throughput", "runs", "streams", "mtu", "cpu", "losses"]


def test_the_runs_chart_holds_every_good_run_and_its_median(tmp_path):
    summaries, charts = _charts(recorded("queue-comparison", tmp_path))
    (series,) = charts["runs"].series
    measured = [s for s in summaries if s.goodput is not None]
    assert series.samples is not None and len(series.samples) == len(measured)
    for s, runs, median in zip(measured, series.samples, series.values, strict=True):
        assert sorted(runs) == pytest.approx(sorted(v / 1e6 for v in s.goodput.values))
        assert median == pytest.approx(s.goodput.median / 1e6)


def test_a_run_of_one_repetition_has_no_runs_chart(tmp_path):
    from tunnelbench.report.charts import runs_chart

    summaries, _ = _charts(recorded("queue-comparison", tmp_path))
    one = [dataclasses.replace(s, trials=s.trials[:1]) for s in summaries]
    assert runs_chart(one, config_labels(one)) is None


def test_the_latency_cdf_pools_every_ping_the_probe_counted(tmp_path):
    """Each configuration's samples are the pings of its good runs' windows: as many as
    the probe counted (``rtt.samples``), their largest its ``rtt.loaded_max_ms``."""
    from tunnelbench.report import view

    loaded = view.load(recorded("bloated-600ms", tmp_path), "latest")
    chart = {c.id: c for c in charts_for_run(loaded.summaries, loaded.artifact)}["latency-cdf"]
    assert chart.kind == "cdf" and chart.x_log  # 0.04 to 600 ms: decades
    (series,) = chart.series
    assert series.samples is not None
    for s, pings in zip(loaded.summaries, series.samples, strict=True):
        ok = [t for t in s.trials if t.status == "ok"]
        assert len(pings) == sum(t.metrics["rtt.samples"] for t in ok)
        assert max(pings) == max(t.metrics["rtt.loaded_max_ms"] for t in ok)


def test_labels_are_short_unique_and_name_the_varying_settings(tmp_path):
    store = recorded("queue-comparison", tmp_path)
    summaries = summarize_run(store.trials(1))
    labels = list(config_labels(summaries).values())
    assert len(set(labels)) == len(labels) == 16
    assert labels[:2] == [
        "none · queue pfifo · limit 50 · upload",
        "wireguard (wireguard-go) · queue pfifo · limit 50 · upload",
    ]
    l2 = summarize_run(recorded("l2-tunnel-mtu", tmp_path).trials(1))
    assert list(config_labels(l2).values())[:2] == [
        "none · LAN MTU 1500 · WAN MTU 1550",  # no "tun MTU -" for the baseline
        "vxlan · LAN MTU 1500 · WAN MTU 1550 · tun MTU 1500",
    ]


def test_throughput_has_medians_whiskers_baselines_and_the_link_rate(tmp_path):
    summaries, charts = _charts(recorded("queue-comparison", tmp_path))
    chart = charts["throughput"]
    measured = [s for s in summaries if s.goodput is not None]
    assert len(chart.categories) == len(measured) == 8  # the 8 skipped are left out
    assert "8 skipped on this machine" in chart.note
    (series,) = chart.series
    for i, s in enumerate(measured):
        goodputs = [t.metrics["goodput_bps"] / 1e6 for t in s.trials if t.status == "ok"]
        assert series.values[i] == pytest.approx(statistics.median(goodputs))
        assert series.low is not None and series.high is not None
        assert (series.low[i], series.high[i]) == (min(goodputs), max(goodputs))
    baselines = {r.category: r.value for r in chart.reference_lines if r.category}
    tunnels = [i for i, s in enumerate(measured) if s.baseline_key is not None]
    assert sorted(baselines) == sorted(chart.categories[i] for i in tunnels)
    for i in tunnels:  # each tunnel's baseline is the no-tunnel row just before it here
        assert baselines[chart.categories[i]] == pytest.approx(series.values[i - 1])
    global_refs = [(r.label, r.value) for r in chart.reference_lines if r.category is None]
    assert global_refs == [("WAN rate", 1000.0)]


def test_mtu_chart_has_one_line_per_tunnel_over_the_path_mtu(tmp_path):
    summaries, charts = _charts(recorded("l2-tunnel-mtu", tmp_path))
    chart = charts["mtu"]
    assert chart.kind == "line"
    assert chart.categories == ("1500", "9000")
    assert [s.name for s in chart.series] == ["none", "vxlan"]
    by_label = {config_labels(summaries)[s.key]: s.goodput.median / 1e6 for s in summaries}
    assert chart.series[1].values == pytest.approx(
        (
            by_label["vxlan · LAN MTU 1500 · WAN MTU 1550 · tun MTU 1500"],
            by_label["vxlan · LAN MTU 9000 · WAN MTU 9050 · tun MTU 9000"],
        )
    )


def test_sweeps_of_a_wide_run(tmp_path):
    _, charts = _charts(wide(tmp_path))
    streams, mtu = charts["streams"], charts["mtu"]
    assert streams.categories == ("1", "2", "4", "8", "16")
    assert mtu.categories == ("1280", "1500", "4000", "6000", "9000")
    assert len(streams.series) == len(mtu.series) == 10
    assert mtu.series[0].name == "none · streams 1"
    assert all(None not in s.values for s in (*streams.series, *mtu.series))
    assert len(charts["throughput"].categories) == 50


def test_cpu_chart_stacks_each_core_of_each_configuration(tmp_path):
    summaries, charts = _charts(recorded("queue-comparison", tmp_path))
    chart = charts["cpu"]
    assert chart.kind == "stacked" and chart.value_max == 100.0
    assert [s.name for s in chart.series] == ["user", "system", "softirq"]  # irq is all 0
    measured = [s for s in summaries if s.goodput is not None]
    assert len(chart.categories) == 2 * len(measured)
    first = measured[1]  # the first WireGuard configuration, its cpu1
    label = f"{config_labels(summaries)[first.key]} · cpu1"
    row = chart.categories.index(label)
    ok = [t for t in first.trials if t.status == "ok"]
    for series in chart.series:
        expected = statistics.median(t.metrics[f"cpu1.{series.name}"] for t in ok)
        assert series.values[row] == pytest.approx(expected)


def test_cpu_rows_are_capped_for_many_configurations(tmp_path):
    _, charts = _charts(wide(tmp_path))
    chart = charts["cpu"]
    assert len(chart.categories) == 100 <= MAX_CPU_ROWS


def test_losses_chart_has_retransmits_and_tunnel_drops(tmp_path):
    summaries, charts = _charts(recorded("queue-comparison", tmp_path))
    chart = charts["losses"]
    retrans, drops = chart.series
    # Recorded before the kernel's window counters: iperf3's own count, named as such.
    assert (retrans.name, drops.name) == ("TCP retransmits (iperf3's count)", "tunnel device drops")
    measured = [s for s in summaries if s.goodput is not None]
    assert retrans.values == tuple(s.retransmits.median for s in measured)
    # No tunnel device without a tunnel: no value, rather than a false zero.
    assert [v is None for v in drops.values] == [s.baseline_key is None for s in measured]


def test_round_trips_are_drawn_on_a_log_axis_where_they_span_decades(tmp_path):
    """Sub-millisecond idle bars vanished beside 24 ms under load on a linear axis: the
    summary image's round-trip panel and the compare page's round-trip bars use
    charts.ms_axis, as the scatter and the distribution do."""
    from tunnelbench.report import compare, compare_page, figures, view
    from tunnelbench.report.charts import round_trip_chart
    from tunnelbench.report.compare import RunRef
    from tunnelbench.report.selector import Selector

    store = recorded("wireguard-implementations", tmp_path)
    loaded = view.load(store, "latest")
    chart = round_trip_chart(loaded.summaries, config_labels(loaded.summaries))
    assert chart is not None and chart.x_log
    assert chart.y_label == "round trip (ms, log scale)"
    ax = figures.figure(chart).axes[0]
    assert ax.get_xscale() == "log"
    low, high = ax.get_xlim()
    smallest = min(v for s in chart.series for v in s.values if v)
    assert 0 < low < smallest and high > max(v for s in chart.series for v in s.values if v)

    db = store.path
    side = [
        compare.load(RunRef(db, "1"), Selector.parse(text, name), name)
        for text, name in (("traffic.streams=1", "A"), ("traffic.streams=4", "B"))
    ]
    drawn = {c.id: c for c in compare_page.charts(compare.compare(*side))}
    latency = drawn["compare-latency"]
    assert latency.x_log and latency.y_label == "round trip (ms, log scale)"
    assert figures.figure(latency).axes[0].get_xscale() == "log"
    assert not drawn["compare-goodput"].x_log  # goodput stays linear
