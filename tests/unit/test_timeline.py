"""Timelines over the measured window (issue 16, item 2; issue 30: at the rate the
instruments sample) on recorded runs: each panel checked against a second instrument
stored with the same trial (the probe's window metrics, the generator's totals), and
drawn in HTML and PNG."""

import re
import statistics
from pathlib import Path

import pytest

from tests.report_fixtures import recorded, unreadable
from tunnelbench.report import figures, html, markdown, timeline, view

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _loaded(name: str, tmp_path: Path) -> view.RunView:
    return view.load(recorded(name, tmp_path), "latest")


def test_each_configuration_gets_its_median_run_over_the_window(tmp_path):
    """timeline.db: one client with a fixed warm-up, which reports every second."""
    loaded = _loaded("timeline", tmp_path)
    found = timeline.timelines(loaded.summaries, loaded.artifact)
    assert [t.title for t in found] == ["none", "wireguard (wireguard-go)"]
    for t, s in zip(found, loaded.summaries, strict=True):
        trial = timeline.median_run(s)
        assert trial is not None and t.id == f"timeline-{trial.id}"
        goodputs = sorted(x.metrics["goodput_bps"] for x in s.trials)
        assert trial.metrics["goodput_bps"] == goodputs[1]  # the middle of 3
        assert [p.title for p in t.panels] == ["goodput", "rtt", "cpu0", "cpu1"]
        # Goodput: the receiver's own 1 s intervals, read again from its document, are
        # the trial's stored series; their mean is the trial's goodput.
        (goodput,) = t.panels[0].series
        intervals = loaded.artifact(trial.id, "intervals")
        assert t.step_s == 1.0 and goodput.at == (0.5, 1.5, 2.5)
        assert goodput.values == pytest.approx([v / 1e6 for v in intervals])
        assert statistics.fmean(intervals) == pytest.approx(trial.metrics["goodput_bps"], rel=0.02)


def test_clients_measured_over_a_common_window_are_drawn_every_tenth_of_a_second(tmp_path):
    """bloated-600ms.db: an "auto" warm-up, whose clients report every 0.1 s. The 30
    points come from the receivers' documents; their mean is the goodput the trial
    stored, and each second's ten points average to its stored second."""
    loaded = _loaded("bloated-600ms", tmp_path)
    found = timeline.timelines(loaded.summaries, loaded.artifact)
    for t, s in zip(found, loaded.summaries, strict=True):
        trial = timeline.median_run(s)
        assert trial is not None
        (goodput,) = t.panels[0].series
        values = [v for v in goodput.values if v is not None]
        assert t.step_s == 0.1 and len(values) == 30
        assert goodput.at is not None and goodput.at[:2] == (0.05, 0.15)
        mean = statistics.fmean(values) * 1e6
        assert mean == pytest.approx(trial.metrics["goodput_bps"], rel=0.02)
        seconds = loaded.artifact(trial.id, "intervals")
        for n, second in enumerate(seconds):
            tenths = values[10 * n : 10 * n + 10]
            assert statistics.fmean(tenths) * 1e6 == pytest.approx(second, rel=0.05)
        assert len({round(v, 3) for v in values}) > 5  # not one value repeated
        (rtt,) = t.panels[1].series
        assert max(v for v in rtt.values if v is not None) <= trial.metrics["rtt.loaded_max_ms"]


def test_every_ping_of_the_window_is_drawn_as_the_probe_counted_it(tmp_path):
    loaded = _loaded("timeline", tmp_path)
    for s in loaded.summaries:
        trial = timeline.median_run(s)
        assert trial is not None
        at, values = timeline.rtt_points(loaded.artifact(trial.id, "probe_readings")["rtt"])
        # The probe's own count of the window's replies, by the same rule.
        assert len(values) == trial.metrics["rtt.samples"] > 20
        assert max(values) == trial.metrics["rtt.loaded_max_ms"]
        assert statistics.median(values) == trial.metrics["rtt.loaded_ms"]
        assert list(at) == sorted(at) and at[0] >= 0 and at[-1] <= 3.0 + 1e-3


def test_a_trial_whose_pings_did_not_run_has_no_round_trips():
    why = "client: `date +%s.%N` said '1764000000': no sub-second clock"
    assert timeline.rtt_points({"not_measured": why}) == ((), ())
    cut = {"window": [1.0, 4.0], "loaded": "PING 198.18.0.1 (198.18.0.1) 56(84) bytes"}
    assert timeline.rtt_points(cut) == ((), ())


def test_cpu_samples_agree_with_the_whole_window_figures(tmp_path):
    loaded = _loaded("timeline", tmp_path)
    for s in loaded.summaries:
        trial = timeline.median_run(s)
        assert trial is not None
        series = loaded.artifact(trial.id, "probes")["series"]
        cpu = timeline.cpu_points(series, 3)
        assert sorted(cpu) == [0, 1]
        for core, parts in cpu.items():
            assert list(parts) == ["user", "system", "softirq"]
            at, _ = parts["user"]
            assert len(at) >= 25 and at[0] > 0 and at[-1] <= 3.0 + 1e-6  # 10 a second
            for n in range(len(at)):
                # Each part stored to 0.1: their sum may pass 100 by the rounding.
                assert 0 <= sum(parts[p][1][n] for p in parts) <= 100.0 + 0.15
            # The mean of the samples against the sampler's first-to-last window figure:
            # two computations of the same share, from different readings.
            for part, (_, values) in parts.items():
                mean = statistics.fmean(values)
                assert mean == pytest.approx(trial.metrics[f"cpu{core}.{part}"], abs=6.0)


def test_runs_recorded_before_the_parts_show_the_busy_share(tmp_path):
    loaded = _loaded("streams-5-runs", tmp_path)
    (first, *_) = timeline.timelines(loaded.summaries, loaded.artifact)
    cpu_panels = [p for p in first.panels if p.title.startswith("cpu")]
    assert cpu_panels and all([x.name for x in p.series] == ["busy"] for p in cpu_panels)


def test_many_configurations_are_small_multiples_with_the_busiest_core(tmp_path):
    loaded = _loaded("queue-comparison", tmp_path)
    found = timeline.timelines(loaded.summaries, loaded.artifact)
    measured = [s for s in loaded.summaries if s.goodput is not None]
    assert len(found) == len(measured) >= timeline.COMPACT_FROM
    for t, s in zip(found, measured, strict=True):
        assert t.compact and t.panels[0].title == "goodput"
        (cpu,) = t.panels[1:]  # one core's whole share: the parts summed
        (busy,) = cpu.series
        trial = timeline.median_run(s)
        assert trial is not None
        parts = timeline.cpu_points(loaded.artifact(trial.id, "probes")["series"], t.seconds)
        core = int(cpu.title[3:])
        assert busy.values == pytest.approx(
            [sum(v) for v in zip(*(p[1] for p in parts[core].values()), strict=True)]
        )
        # The busiest: no other core was busier over the window.
        load = {c: sum(sum(values) for _, values in parts[c].values()) for c in parts}
        assert load[core] == max(load.values())
    directory = tmp_path / "charts"
    (path,) = figures.write_timelines(found, directory)
    assert path.name == "timelines.png" and path.read_bytes().startswith(PNG_SIGNATURE)
    page = html.render(loaded)
    section = page.split('<section id="seconds">', 1)[1].split("</section>", 1)[0]
    assert section.count("<figure") == 1 and '<svg id="chart-timelines"' in section
    ids = re.findall(r' id="([^"]+)"', section)
    assert len(ids) == len(set(ids)) and "timelines-matplotlib.axis_1" in ids


def test_html_and_markdown_carry_a_timeline_per_configuration(tmp_path):
    loaded = _loaded("timeline", tmp_path)
    page = html.render(loaded)
    section = page.split('<section id="seconds">', 1)[1].split("</section>", 1)[0]
    assert section.count("<figure") == 2 and section.count("<svg") == 2
    # One time axis per figure: only its last panel is labelled.
    assert section.count(">seconds into the measured window</text>") == 2
    for drawing in section.split("<svg")[1:]:
        assert unreadable("<svg" + drawing.split("</svg>")[0] + "</svg>") == []
    out = tmp_path / "out" / "t.md"
    out.parent.mkdir()
    written = markdown.write(loaded, out)
    pictures = [p for p in written if p.name.startswith("timeline-")]
    assert len(pictures) == 2
    text = out.read_text()
    assert "## Over the window" in text
    for p in pictures:
        assert f"](t-charts/{p.name})" in text and p.read_bytes().startswith(PNG_SIGNATURE)
