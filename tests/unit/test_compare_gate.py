"""Runs side by side (issue 16, item 3): the regression gate's exit codes on recorded
runs, the comparison as an HTML page and as Markdown with its charts, and runs that
carry a label and notes through every listing and report."""

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.cli_process import tunnelbench
from tests.report_fixtures import RUNS
from tunnelbench.bench.store import Store
from tunnelbench.report import compare, compare_page, json_report, markdown, runs, terminal, view

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    for name in ("streams-5-runs", "wireguard-implementations", "timeline"):
        shutil.copyfile(RUNS / f"{name}.db", tmp_path / f"{name}.db")
    return tmp_path


ONE, FOUR = "streams-5-runs.db:1@traffic.streams=1", "streams-5-runs.db:1@traffic.streams=4"


def test_the_gate_passes_a_faster_b(lab):
    # 1 -> 4 streams: none +50% (p = 0.0079), wireguard-go no significant difference.
    done = tunnelbench("compare", ONE, FOUR, "--fail-if-slower", "5", cwd=lab)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "B faster by 50.0%" in done.stdout


def test_the_gate_fails_a_significantly_slower_b_and_names_the_pair(lab):
    done = tunnelbench("compare", FOUR, ONE, "--fail-if-slower", "5%", cwd=lab)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    # The pair is named with the setting that changed, which the selectors fixed.
    assert line.startswith(
        "compare: slower by more than 5%: none, streams 4 → 1: B is slower by 33.3% (95% CI"
    )
    assert line.endswith("p = 0.0079)")


def test_a_slowdown_within_the_limit_passes(lab):
    # B is 33% slower: a 40% limit lets it through.
    done = tunnelbench("compare", FOUR, ONE, "--fail-if-slower", "40", cwd=lab)
    assert done.returncode == 0 and done.stderr == ""


def test_no_significant_change_passes(lab):
    done = tunnelbench("compare", "streams-5-runs.db:1", "streams-5-runs.db:1",
                       "--fail-if-slower", "1", cwd=lab)  # fmt: skip
    assert done.returncode == 0 and done.stderr == ""
    # A run against itself: 0% apart, inside every baseline's spread.
    assert done.stdout.count("within noise (CV ") == 4


def test_pairs_too_few_to_decide_pass_but_are_named(lab):
    # 2 runs a side: the rank test cannot reach p < 0.05 whatever the difference.
    done = tunnelbench("compare", "wireguard-implementations.db:1@traffic.streams=1",
                       "wireguard-implementations.db:1@traffic.streams=4",
                       "--fail-if-slower", "5", cwd=lab)  # fmt: skip
    assert done.returncode == 0
    (line,) = done.stderr.splitlines()
    assert line.startswith("compare: 4 pair(s) have too few runs for the rank test")


@pytest.mark.parametrize("value", ["abc", "101", "-5", "5%%"])
def test_a_bad_limit_is_one_line_and_exit_2(lab, value):
    done = tunnelbench("compare", ONE, FOUR, "--fail-if-slower", value, cwd=lab)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"tunnelbench: error: --fail-if-slower: {value!r} is not a percentage from 0 to 100,"
        " e.g. 2%"
    ]


def test_the_html_page_has_the_verdicts_and_both_runs_on_one_scale(lab):
    done = tunnelbench("compare", ONE, FOUR, "--format", "html", "-o", "c.html", cwd=lab)
    assert done.returncode == 0, done.stderr
    page = (lab / "c.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert "B faster by 50.0%" in page
    goodput = page.split('<svg id="chart-compare-goodput"', 1)[1].split("</svg>", 1)[0]
    # Two pairs, a bar for each side (and its legend key), one value axis for all.
    assert goodput.count('id="compare-goodput-patch_') >= 2 + 4 + 2
    assert "A: run 1 @ traffic.streams=1" in goodput
    assert '<svg id="chart-compare-latency"' in page
    forest = page.split('<svg id="chart-compare-forest"', 1)[1].split("</svg>", 1)[0]
    assert "goodput, B ÷ A" in forest and "round trip under load (p95), B ÷ A" in forest


def test_the_charts_hold_each_sides_medians(lab):
    comparison = compare.build(f"{lab}/{ONE}", f"{lab}/{FOUR}", lab / "streams-5-runs.db")
    forest, goodput, latency = compare_page.charts(comparison)
    # The forest plot: each pair's B ÷ A and its interval, goodput's and the round trip's.
    assert forest.kind == "forest" and [r.value for r in forest.reference_lines] == [1.0]
    for which, series in zip(("stats", "latency_stats"), forest.series, strict=True):
        for i, row in enumerate(comparison.rows):
            stats = getattr(row, which)
            assert stats is not None and stats.ratio_ci is not None
            assert series.values[i] == stats.ratio
            assert (series.low[i], series.high[i]) == stats.ratio_ci  # type: ignore[index]
            assert series.low[i] <= series.values[i] <= series.high[i]  # type: ignore[index,operator]
    for row, a, b in zip(comparison.rows, *(s.values for s in goodput.series), strict=True):
        assert row.a is not None and row.b is not None
        assert row.a.goodput is not None and row.b.goodput is not None
        assert a == pytest.approx(row.a.goodput.median / 1e6)
        assert b == pytest.approx(row.b.goodput.median / 1e6)
    for row, a, b in zip(comparison.rows, *(s.values for s in latency.series), strict=True):
        assert row.a is not None and row.b is not None
        assert row.a.latency is not None and row.b.latency is not None
        assert (a, b) == (row.a.latency.loaded_p95_ms, row.b.latency.loaded_p95_ms)


def test_markdown_written_to_a_file_links_its_charts(lab):
    done = tunnelbench("compare", ONE, FOUR, "--format", "md", "-o", "c.md", cwd=lab)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "wrote c.md and 3 charts in c-charts/\n"  # as `report -o` says it
    text = (lab / "c.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert links == [
        "c-charts/compare-forest.png", "c-charts/compare-goodput.png",
        "c-charts/compare-latency.png",
    ]  # fmt: skip
    assert all((lab / link).read_bytes().startswith(PNG_SIGNATURE) for link in links)


def test_a_label_and_notes_go_everywhere_the_run_is_named(lab):
    db = lab / "timeline.db"
    store = Store.open_existing(db)
    store.set_label(1, "kernel 6.1 baseline", "before the cake change\nsecond line")
    loaded = view.load(store, "1")
    assert loaded.run.label == "kernel 6.1 baseline"
    listing = runs.render(store).splitlines()
    assert listing[0].split()[-1] == "label" and listing[2].endswith("kernel 6.1 baseline")
    assert terminal.render(loaded, after_run=False).startswith("run 1 «kernel 6.1 baseline» (")
    text = markdown.render(loaded)
    assert "- **Label:** kernel 6.1 baseline" in text
    assert "- **Notes:** before the cake change second line" in text
    doc = json_report.document(loaded)
    assert (doc["run"]["label"], doc["run"]["notes"]) == (
        "kernel 6.1 baseline",
        "before the cake change\nsecond line",
    )
    side = json.loads(compare.render_json(compare.build("1", "1", db)))["a"]
    assert side["label"] == "kernel 6.1 baseline" and "«kernel 6.1 baseline»" in side["description"]
    store.close()


def test_runs_without_labels_show_no_label_column(lab):
    store = Store.read(lab / "streams-5-runs.db")
    assert "label" not in runs.render(store).splitlines()[0]
    assert view.load(store, "1").run.label is None


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--label", " "], "argument --label: the label is empty"),
        (["--label", "x" * 81], "argument --label: the label has 81 characters; at most 80"),
        (["--label", "a\tb"], "argument --label: the label holds a control character"),
        (["--notes", "n" * 2001], "argument --notes: the notes has 2001 characters; at most 2000"),
    ],
)
def test_a_bad_label_is_refused_before_anything_runs(lab, args, error):
    for verb in ("run", "tune"):
        done = tunnelbench(verb, *args, "--db", "new.db", cwd=lab)
        assert done.returncode == 2
        assert done.stderr.splitlines()[-1].endswith(error)
        assert not (lab / "new.db").exists()


def test_a_misspelt_format_gets_the_closest_one(lab):
    done = tunnelbench("compare", ONE, FOUR, "--format", "htm", cwd=lab)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "tunnelbench: error: --format: unknown value 'htm'; allowed: table, md, html, json;"
        " did you mean 'html'?"
    ]
