"""The Markdown report: tables of the recorded runs against golden files, charts as PNG
files beside the report, skipped and failed configurations explained.

The golden files were generated once and checked line by line against the numbers in the
fixture databases (medians, min-max, CV, retransmits, % of baseline and the busiest core
recomputed with sqlite3). The recorded runs are copied before use (see report_fixtures).
"""

import re
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.report_fixtures import RECORDED, recorded, wide
from tunnelbench.analysis.summary import summarize_run
from tunnelbench.bench.store import Store
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, TrialConfig
from tunnelbench.model.records import Resolved, RunStatus, TrialStatus
from tunnelbench.report import markdown, view
from tunnelbench.report.charts import charts_for_run

GOLDEN = FIXTURES / "golden" / "reports"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", RECORDED)
def test_tables_match_the_golden_file(name, tmp_path):
    store = recorded(name, tmp_path)
    assert markdown.render(view.load(store, "latest")) == (GOLDEN / f"{name}.md").read_text()


def test_write_puts_every_chart_beside_the_report_with_relative_links(tmp_path):
    store = recorded("queue-comparison", tmp_path)
    path = tmp_path / "out" / "queue.md"
    path.parent.mkdir()
    written = markdown.write(view.load(store, "1"), path)
    text = path.read_text()
    # Everything the text version has, then the charts.
    assert text.startswith(markdown.render(view.load(store, "1")))
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    run = store.run("1")
    expected = charts_for_run(summarize_run(store.trials(run.id)))
    # 12 measured configurations: their seconds are one picture of small multiples.
    assert links == [*(f"queue-charts/{c.id}.png" for c in expected), "queue-charts/timelines.png"]
    assert written == [path, *(path.parent / link for link in links)]
    for link in links:
        image = (path.parent / link).read_bytes()
        assert image.startswith(PNG_SIGNATURE) and len(image) > 10_000
    for chart in expected:
        assert f"### {chart.title}" in text


def test_charts_directory_is_named_after_the_report():
    assert markdown.charts_dir(Path("/x/tb-run3.md")) == Path("/x/tb-run3-charts")


def test_failed_trials_are_counted_and_explained(tmp_path):
    """A test-local copy of the L2 run with one vxlan trial turned into a failure (its
    metrics removed): the row says how many runs failed, the list says why."""
    store = recorded("l2-tunnel-mtu", tmp_path)
    db = sqlite3.connect(store.path)
    with db:
        db.execute("UPDATE trials SET status = 'failed', error = 'iperf3 | exited 1' WHERE seq = 2")
        db.execute("DELETE FROM metrics WHERE trial_id = (SELECT id FROM trials WHERE seq = 2)")
    db.close()
    text = markdown.render(view.load(store, "1"))
    assert "| vxlan (1 of 3 runs failed) |" in text
    assert "- trial 2 (vxlan, run 1): iperf3 | exited 1" in text
    assert "trials: 12 (11 ok, 1 failed)" in text
    # In the table, a pipe from the store cannot break the row.
    assert markdown.escape("a | b") == "a \\| b"


def test_fifty_configurations_stay_one_row_each(tmp_path):
    store = wide(tmp_path)
    path = tmp_path / "wide.md"
    markdown.write(view.load(store, "1"), path)
    text = path.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| none") or "| vxlan" in line]
    assert len(rows) == 50
    assert (tmp_path / "wide-charts" / "cpu.png").read_bytes().startswith(PNG_SIGNATURE)


def test_skipped_configurations_say_so_in_the_table(tmp_path):
    text = markdown.render(view.load(recorded("queue-comparison", tmp_path), "1"))
    skipped = [line for line in text.splitlines() if re.search(r"\|\s+skipped \|", line)]
    assert len(skipped) == 8
    assert all(("fq_codel" in line) != ("cake" in line) for line in skipped)


def test_a_run_that_measured_nothing_has_no_charts(tmp_path):
    """A run whose every trial was skipped (stored here through the Store API)."""
    store = Store(tmp_path / "skipped.db")
    config = TrialConfig()
    experiment = Experiment(configs=(config,), repetitions=2)
    run_id = store.start_run("tunnelbench run", experiment, Environment(versions={}))
    for seq in (1, 2):
        store.add_trial(
            run_id, seq=seq, repetition=seq, config_key=config.key(), config=config,
            resolved=Resolved(), status=TrialStatus.SKIPPED, error="iperf3: not installed",
            started_at=0.0,
            metrics={}, artifacts={},
        )  # fmt: skip
    store.finish_run(run_id, RunStatus.COMPLETE)
    path = tmp_path / "skipped.md"
    assert markdown.write(view.load(store, "1"), path) == [path]
    assert not markdown.charts_dir(path).exists()
    text = path.read_text()
    assert "## Charts" not in text and "Nothing was measured." in text
    assert "- 1 configuration (2 trials): iperf3: not installed" in text


@pytest.mark.parametrize(
    ("windowed", "source"),
    [
        ("all", "(iperf3: the receiving end's interval reports in the measured window)"),
        (
            "some",
            "(iperf3: the receiving end's interval reports in the measured window;"
            " before it, iperf3's end summary `end.sum_received`)",
        ),
        ("none", "(iperf3's end summary `end.sum_received`)"),
    ],
)
def test_the_explanation_names_how_each_trials_goodput_was_counted(tmp_path, windowed, source):
    store = recorded("l2-tunnel-mtu", tmp_path)
    ids = [row[0] for row in store.db.execute("SELECT id FROM trials ORDER BY id")]
    chosen = {"all": ids, "some": ids[:1], "none": []}[windowed]
    store.db.executemany(
        "INSERT INTO metrics VALUES (?, 'goodput.window_s', 2.0)", [(i,) for i in chosen]
    )
    assert f"Goodput is what the receiver counted {source}" in markdown.render(
        view.load(store, "latest")
    )
