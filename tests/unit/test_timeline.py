"""Second-by-second timelines (issue 16, item 2) on recorded runs: each panel checked
against a second instrument stored with the same trial (the probe's window metrics, the
generator's totals), and drawn in HTML and PNG."""

import statistics
from pathlib import Path

import pytest

from tests.report_fixtures import recorded
from tunnelbench.probes.rtt import parse_ping
from tunnelbench.report import html, markdown, png, timeline, view

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _loaded(name: str, tmp_path: Path) -> view.RunView:
    return view.load(recorded(name, tmp_path), "latest")


def test_each_configuration_gets_its_median_run_second_by_second(tmp_path):
    loaded = _loaded("timeline", tmp_path)
    found = timeline.timelines(loaded.summaries, loaded.artifact)
    assert [t.title for t in found] == ["none", "wireguard (wireguard-go)"]
    for t, s in zip(found, loaded.summaries, strict=True):
        trial = timeline.median_run(s)
        assert trial is not None and t.id == f"timeline-{trial.id}"
        goodputs = sorted(x.metrics["goodput_bps"] for x in s.trials)
        assert trial.metrics["goodput_bps"] == goodputs[1]  # the middle of 3
        assert [p.title for p in t.panels] == ["goodput", "round trip", "cpu0", "cpu1"]
        # Goodput: the receiver's intervals; their mean is the trial's goodput.
        (goodput,) = t.panels[0].series
        intervals = loaded.artifact(trial.id, "intervals")
        assert goodput.values == pytest.approx([v / 1e6 for v in intervals])
        assert statistics.fmean(intervals) == pytest.approx(trial.metrics["goodput_bps"], rel=0.02)
        assert t.panels[0].categories == ("1", "2", "3")


def test_round_trip_seconds_hold_the_probes_own_replies(tmp_path):
    loaded = _loaded("timeline", tmp_path)
    for s in loaded.summaries:
        trial = timeline.median_run(s)
        assert trial is not None
        rtt = loaded.artifact(trial.id, "probe_readings")["rtt"]
        seconds = len(loaded.artifact(trial.id, "intervals"))
        per_second = timeline.rtt_seconds(rtt, seconds)
        replies = parse_ping(rtt["loaded"]).replies
        begin = rtt["window"][0]
        inside = [r.rtt_ms for r in replies if 0 <= r.at - begin < seconds]
        # The probe counted the replies in its window (the same span, ends inclusive).
        assert abs(len(inside) - trial.metrics["rtt.samples"]) <= 1
        assert all(v is not None for v in per_second)
        assert all(min(inside) <= v <= max(inside) for v in per_second if v is not None)
        assert max(inside) <= trial.metrics["rtt.loaded_max_ms"]


def test_a_trial_whose_pings_did_not_run_has_no_round_trip_seconds():
    why = "client: `date +%s.%N` said '1764000000': no sub-second clock"
    assert timeline.rtt_seconds({"not_measured": why}, 3) == [None, None, None]


def test_cpu_seconds_agree_with_the_whole_window_figures(tmp_path):
    loaded = _loaded("timeline", tmp_path)
    for s in loaded.summaries:
        trial = timeline.median_run(s)
        assert trial is not None
        series = loaded.artifact(trial.id, "probes")["series"]
        cpu = timeline.cpu_seconds(series, 3)
        assert sorted(cpu) == [0, 1]
        for core, parts in cpu.items():
            assert list(parts) == ["user", "system", "softirq"]
            for second in range(3):
                shown = sum(parts[p][second] or 0.0 for p in parts)
                assert 0 <= shown <= 100.0 + 1e-6
            # The mean of the seconds against the sampler's first-to-last window figure:
            # two computations of the same share, from different readings.
            for part in parts:
                mean = statistics.fmean(v for v in parts[part] if v is not None)
                assert mean == pytest.approx(trial.metrics[f"cpu{core}.{part}"], abs=6.0)


def test_runs_recorded_before_the_parts_show_the_busy_share(tmp_path):
    loaded = _loaded("streams-5-runs", tmp_path)
    (first, *_) = timeline.timelines(loaded.summaries, loaded.artifact)
    cpu_panels = [p for p in first.panels if p.title.startswith("cpu")]
    assert cpu_panels and all([x.name for x in p.series] == ["busy"] for p in cpu_panels)


def test_many_configurations_are_small_multiples_without_cpu(tmp_path):
    loaded = _loaded("queue-comparison", tmp_path)
    found = timeline.timelines(loaded.summaries, loaded.artifact)
    measured = [s for s in loaded.summaries if s.goodput is not None]
    assert len(found) == len(measured) >= timeline.COMPACT_FROM
    assert all(t.compact and [p.title for p in t.panels] == ["goodput"] for t in found)
    directory = tmp_path / "charts"
    (path,) = png.write_timelines(found, directory)
    assert path.name == "timelines.png" and path.read_bytes().startswith(PNG_SIGNATURE)
    page = html.render(loaded)
    assert page.count('<figure id="fig-timeline-') == len(found)
    assert '<div class="multiples">' in page


def test_html_and_markdown_carry_a_timeline_per_configuration(tmp_path):
    loaded = _loaded("timeline", tmp_path)
    page = html.render(loaded)
    section = page.split('<section id="seconds">', 1)[1].split("</section>", 1)[0]
    assert section.count("<figure") == 2 and section.count("<svg") == 8
    # One time axis per figure: only its last panel is labelled.
    assert section.count(">second of the measured window</text>") == 2
    out = tmp_path / "out" / "t.md"
    out.parent.mkdir()
    written = markdown.write(loaded, out)
    pictures = [p for p in written if p.name.startswith("timeline-")]
    assert len(pictures) == 2
    text = out.read_text()
    assert "## Second by second" in text
    for p in pictures:
        assert f"](t-charts/{p.name})" in text and p.read_bytes().startswith(PNG_SIGNATURE)
