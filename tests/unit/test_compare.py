"""`report --compare A B`: configurations matched by their settings, the change of the
median, whether the runs' ranges overlap, and what differs in the environment."""

import json
import sqlite3
from pathlib import Path

import pytest

from tests.report_fixtures import recorded
from tunnelbench.errors import UserError
from tunnelbench.report import compare
from tunnelbench.report.compare import RunRef


def sides(a: Path, b: Path) -> compare.Comparison:
    return compare.compare(compare.load(RunRef(a, "1")), compare.load(RunRef(b, "1")))


def faster_copy(tmp_path: Path) -> Path:
    """A test-local copy of the L2 run, altered to stand for a second run: every vxlan
    trial's goodput x 1.5 and another kernel. Not a measurement."""
    path = recorded("l2-tunnel-mtu", tmp_path / "b").path
    db = sqlite3.connect(path)
    with db:
        db.execute(
            "UPDATE metrics SET value = value * 1.5 WHERE name = 'goodput_bps' AND trial_id IN"
            " (SELECT id FROM trials WHERE json_extract(config, '$.tunnel.kind') = 'vxlan')"
        )
        env = json.loads(db.execute("SELECT environment FROM runs").fetchone()[0])
        db.execute("UPDATE runs SET environment = ?", (json.dumps(env | {"kernel": "6.99"}),))
    db.close()
    return path


@pytest.fixture
def l2(tmp_path) -> Path:
    return recorded("l2-tunnel-mtu", tmp_path).path


def test_a_run_against_itself_changes_nothing(l2):
    comparison = sides(l2, l2)
    assert [r.change_pct for r in comparison.rows] == [0.0, 0.0, 0.0, 0.0]
    assert all(r.ranges_overlap for r in comparison.rows)
    assert comparison.environment_changes == []
    assert "Environment: the same in both runs." in compare.render_table(comparison)


def test_a_faster_run_shows_the_change_per_configuration(l2, tmp_path):
    (tmp_path / "b").mkdir()
    comparison = sides(l2, faster_copy(tmp_path))
    by_kind: dict[str, list[compare.Row]] = {}
    for row in comparison.rows:
        by_kind.setdefault(row.summary.config.tunnel.kind.value, []).append(row)
    assert [r.change_pct for r in by_kind["none"]] == [0.0, 0.0]
    assert [r.change_pct for r in by_kind["vxlan"]] == pytest.approx([50.0, 50.0])
    assert [r.ranges_overlap for r in by_kind["vxlan"]] == [False, False]
    assert comparison.environment_changes == [("kernel", "6.18.44-fc-v669", "6.99")]
    text = compare.render_markdown(comparison)
    assert '  - kernel: `"6.18.44-fc-v669"` → `"6.99"`' in text
    vxlan = [line for line in text.splitlines() if line.startswith("| vxlan")]
    assert len(vxlan) == 2
    # 12,896 Mbit/s x 1.5 = 19,344; the median of three scaled values is the scaled median.
    assert "|   12,896 |   19,344 | +50.0% | no " in vxlan[0]
    assert all("145%" in line for line in vxlan)  # % of baseline in B: 97% x 1.5


def test_runs_of_different_plans_have_nothing_in_common(l2, tmp_path):
    (tmp_path / "q").mkdir()
    queue = recorded("queue-comparison", tmp_path / "q").path
    comparison = sides(queue, l2)
    changes = [compare._change(r) for r in comparison.rows]
    assert changes == ["only in A"] * 16 + ["only in B"] * 4
    table = compare.render_table(comparison)
    assert "versions.wireguard/wireguard-go" in table  # only A used wireguard-go


def test_run_references(l2, tmp_path):
    default = tmp_path / "default.db"
    assert RunRef.parse("3", default) == RunRef(default, "3")
    assert RunRef.parse("latest", default) == RunRef(default, "latest")
    assert RunRef.parse(f"{l2}:1", default) == RunRef(l2, "1")
    assert RunRef.parse(str(l2), default) == RunRef(l2, "latest")
    for bad in ("x", f"{tmp_path}/missing.db", f"{l2}:x"):
        with pytest.raises(UserError, match="is not a run id, 'latest', a results database"):
            RunRef.parse(bad, default)


def test_only_table_and_markdown(l2):
    with pytest.raises(UserError, match="'csv' is not available with --compare"):
        compare.render(RunRef(l2, "1"), RunRef(l2, "1"), "csv")
