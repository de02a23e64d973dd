"""The CSV report: one row per trial, configuration flattened into columns, and every
number reads back exactly as the store holds it."""

import csv
import io
import json
from typing import Any

import pytest

from tests.report_fixtures import RECORDED, recorded
from tunnelbench.model.plan import flatten
from tunnelbench.report import csv_report, view


def parse(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def decode_like(cell: str, stored: Any) -> Any:
    """A cell read back as the type of the stored value."""
    if stored is None:
        return None if cell == "" else cell
    if isinstance(stored, bool):
        return {"true": True, "false": False}[cell]
    if isinstance(stored, int):
        return int(cell)
    if isinstance(stored, float):
        return float(cell)
    if isinstance(stored, list | dict):
        return json.loads(cell)
    return cell


@pytest.mark.parametrize("name", RECORDED)
def test_round_trip_gives_the_stored_numbers_exactly(name, tmp_path):
    store = recorded(name, tmp_path)
    run = store.run("latest")
    trials = store.trials(run.id)
    rows = parse(csv_report.render(view.load(store, "latest")))
    assert len(rows) == len(trials)
    for row, trial in zip(rows, trials, strict=True):
        assert int(row["run_id"]) == trial.run_id == run.id
        assert (int(row["trial_id"]), int(row["seq"])) == (trial.id, trial.seq)
        assert int(row["repetition"]) == trial.repetition
        assert row["status"] == trial.status
        assert row["error"] == (trial.error or "")
        for path, value in flatten(trial.config.to_dict()).items():
            assert decode_like(row[f"config.{path}"], value) == value, path
        for key, value in flatten(trial.resolved.to_dict(facts=False)).items():
            assert decode_like(row[f"resolved.{key}"], value) == value, key
        metric_columns = {c[len("metric.") :]: v for c, v in row.items() if c.startswith("metric.")}
        for metric, cell in metric_columns.items():
            if metric in trial.metrics:
                assert float(cell) == trial.metrics[metric], metric  # exact, not approximate
            else:
                assert cell == "", metric
        assert set(trial.metrics) <= set(metric_columns)


def test_skipped_trials_are_rows_with_their_reason(tmp_path):
    rows = parse(csv_report.render(view.load(recorded("queue-comparison", tmp_path), "1")))
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert len(skipped) == 24
    assert all("is not available in this kernel" in r["error"] for r in skipped)
    assert all(r["metric.goodput_bps"] == "" for r in skipped)
    assert {r["config.lab.wan.queue"] for r in skipped} == {"fq_codel", "cake"}


def test_columns_fixed_then_config_then_resolved_then_metrics(tmp_path):
    header = csv_report.render(view.load(recorded("l2-tunnel-mtu", tmp_path), "1")).splitlines()[0]
    columns = header.split(",")
    assert columns[:6] == ["run_id", "trial_id", "seq", "repetition", "status", "error"]
    kinds = [c.split(".")[0] for c in columns[6:]]
    assert kinds == sorted(kinds, key=["config", "resolved", "metric"].index)
    metrics = [c for c in columns if c.startswith("metric.")]
    assert metrics[:3] == ["metric.goodput_bps", "metric.upload_bps", "metric.retransmits"]
    # Digits sort as numbers: cpu2 would come before cpu10.
    assert sorted(["cpu10.idle", "cpu2.idle"], key=csv_report._natural) == [
        "cpu2.idle",
        "cpu10.idle",
    ]


def test_cells():
    assert [csv_report.cell(v) for v in (None, True, 0.1, 3, ["gw"], "x")] == [
        "", "true", "0.1", "3", '["gw"]', "x",
    ]  # fmt: skip
