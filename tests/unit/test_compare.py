"""`compare A B` (and its alias `report --compare A B`): configurations paired by their
settings (whole runs, or the parts of runs a selector picks), the ratio of medians with
its interval, the rank test, the verdict, and what differs in the environment.

The expected numbers are recomputed by hand from the recorded fixture runs (values read
with sqlite3 from tests/fixtures/runs/*.db, shown in the comments).
"""

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.report_fixtures import recorded
from tunnelbench.analysis.summary import summarize_run
from tunnelbench.errors import UserError
from tunnelbench.kinds import Direction, TunnelKind
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, TrafficSettings, TrialConfig, TunnelSettings
from tunnelbench.model.records import Resolved, RunRecord, RunStatus, TrialRecord, TrialStatus
from tunnelbench.report import compare, compare_markdown, formats
from tunnelbench.report.compare import RunRef, SideRef
from tunnelbench.report.selector import Filter, Selector

GOLDEN = FIXTURES / "golden"


def sides(a: Path, b: Path) -> compare.Comparison:
    return compare.compare(compare.load(RunRef(a, "1")), compare.load(RunRef(b, "1")))


def selected(db: Path, a: str, b: str) -> compare.Comparison:
    side_a = compare.load(RunRef(db, "1"), Selector.parse(a, "A"), "A")
    side_b = compare.load(RunRef(db, "1"), Selector.parse(b, "B"), "B")
    return compare.compare(side_a, side_b)


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


@pytest.fixture
def queue(tmp_path) -> Path:
    (tmp_path / "q").mkdir()
    return recorded("queue-comparison", tmp_path / "q").path


def test_a_run_against_itself_changes_nothing(l2):
    comparison = sides(l2, l2)
    stats = [r.stats for r in comparison.rows]
    assert [s.ratio for s in stats] == [1.0, 1.0, 1.0, 1.0]  # type: ignore[union-attr]
    assert [s.p for s in stats] == [1.0, 1.0, 1.0, 1.0]  # type: ignore[union-attr]
    # 3 runs a side: the rank test could never reach p < 0.05 (its floor is 2/C(6,3) = 0.1).
    # The same runs differ by 0%, less than the baselines' spread (CV 2.3% and 6.9%).
    assert [compare.short_verdict(r) for r in comparison.rows] == [
        "too few runs (3 vs 3), within noise"
    ] * 4
    assert comparison.environment_changes == []
    text = compare.render_table(comparison)
    assert "Environment: the same in both runs." in text
    *_, undecidable, within, retransmits = text.splitlines()
    assert undecidable == (
        "Cannot tell with 3 and 3 runs: no difference can reach p < 0.05 "
        "(smallest possible p = 0.1); run at least 4 repetitions."
    )
    assert within.startswith("Within noise: not significant, and the medians differ by less")
    # Recorded before the kernel's window counters: the retrans columns are iperf3's.
    assert retransmits.startswith("Retransmits marked *: iperf3's own count")


def test_a_faster_run_shows_the_ratio_per_configuration(l2, tmp_path):
    (tmp_path / "b").mkdir()
    comparison = sides(l2, faster_copy(tmp_path))
    by_kind: dict[str, list[compare.Row]] = {}
    for row in comparison.rows:
        by_kind.setdefault(row.summary.config.tunnel.kind.value, []).append(row)
    assert [r.change_pct for r in by_kind["none"]] == [0.0, 0.0]
    assert [r.change_pct for r in by_kind["vxlan"]] == pytest.approx([50.0, 50.0])
    for row in by_kind["vxlan"]:
        stats = row.stats
        assert stats is not None and stats.ratio_ci is not None
        # B's runs are A's x 1.5, all above A's: completely separated, p = 2/20 = 0.1.
        assert stats.p == pytest.approx(0.1) and stats.method == "exact"
        # MTU 1500 runs: 12,063 12,896 13,076 Mbit/s; each resampled ratio lies between
        # 1.5 x 12,063 / 13,076 = 1.384 and 1.5 x 13,076 / 12,063 = 1.626.
        low, high = stats.ratio_ci
        assert 1.38 < low < 1.5 < high < 1.63
    assert comparison.environment_changes == [("kernel", "6.18.44-fc-v669", "6.99")]
    text = compare_markdown.render(comparison)
    assert '  - kernel: `"6.18.44-fc-v669"` → `"6.99"`' in text
    vxlan = [line for line in text.splitlines() if line.startswith("| vxlan")]
    assert len(vxlan) == 2
    # 12,896 Mbit/s x 1.5 = 19,344; the median of three scaled values is the scaled median.
    assert "| 12,896→19,344 | too few runs " in vxlan[0]
    flowing = " ".join(text.split())  # the list items wrap at 100 characters
    assert (
        "- **vxlan, LAN MTU 1500, WAN MTU 1550, tun MTU 1500**: goodput 12,896 → 19,344"
        " Mbit/s: too few runs (3 vs 3); +50.0%, 95% CI +"
    ) in flowing


def test_runs_of_different_plans_have_nothing_in_common(l2, queue):
    comparison = sides(queue, l2)
    verdicts = [compare.short_verdict(r) for r in comparison.rows]
    assert verdicts == ["only in A"] * 16 + ["only in B"] * 4
    table = compare.render_table(comparison)
    assert "versions.wireguard/wireguard-go" in table  # only A used wireguard-go


def test_two_queue_limits_of_one_run(queue, monkeypatch):
    monkeypatch.chdir(queue.parent)  # the golden output names the database relatively
    comparison = selected(Path(queue.name), "lab.wan.queue_limit=50", "lab.wan.queue_limit=1000")
    paired = [r for r in comparison.rows if r.a is not None and r.b is not None]
    # pfifo 50 vs pfifo 1000 for none/wireguard x upload/download; fq_codel and cake ran
    # (were skipped) only at limit 1000, so they are only in B.
    assert [(r.summary.label, r.summary.config.traffic.direction.value) for r in paired] == [
        ("none", "upload"),
        ("wireguard (wireguard-go)", "upload"),
        ("none", "download"),
        ("wireguard (wireguard-go)", "download"),
    ]
    assert [compare.short_verdict(r) for r in comparison.rows[4:]] == ["only in B"] * 8
    none_upload = paired[0].stats
    assert none_upload is not None
    # A (limit 50): 955.886, 956.519, 950.553 Mbit/s; B (limit 1000): 955.388, 956.349,
    # 955.767. Ratio of medians 955.767 / 955.886 = 0.99988. Ranks of A among the six:
    # 1, 4, 6 (sum 11 against an expected 10.5): half of the 20 splits are at least as
    # extreme on each side, so p = 1.
    assert none_upload.ratio == pytest.approx(955.767149 / 955.885611, rel=1e-6)
    assert none_upload.p == 1.0
    assert compare.render_table(comparison) == (
        GOLDEN / "compare-queue-limits.txt"
    ).read_text().rstrip("\n")


def test_baseline_against_a_tunnel_ignores_the_tunnel_settings(l2, monkeypatch):
    monkeypatch.chdir(l2.parent)  # the golden output names the database relatively
    comparison = selected(Path(l2.name), "tunnel.kind=none", "tunnel.kind=vxlan")
    # vxlan sets tunnel.mtu (1500, 9000); a baseline has none: paired by the lab alone.
    assert [(r.a.config.lab.lan_mtu, r.b.config.tunnel.mtu) for r in comparison.rows] == [  # type: ignore[union-attr]
        (1500, 1500),
        (9000, 9000),
    ]
    first = comparison.rows[0].stats
    assert first is not None
    # none: 12,420 13,304 14,262; vxlan: 12,063 12,896 13,076 -> ratio 12,896/13,304 =
    # 0.9693. A's ranks among the six are 2, 5, 6 (sum 13); 4 of the 20 splits have a
    # sum >= 13 ({4,5,6} {3,5,6} {2,5,6} {3,4,6}), so p = 2 x 4/20 = 0.4.
    assert first.ratio == pytest.approx(12895.867547 / 13304.113828, rel=1e-6)
    assert first.p == pytest.approx(0.4)
    header, body = compare.rows(comparison)
    assert header[:4] == ["tunnel", "LAN MTU", "WAN MTU", "tun MTU"]
    assert body[0][:4] == ["none → vxlan", "1500", "1550", "- → 1500"]
    assert compare_markdown.render(comparison) == (GOLDEN / "compare-l2-none-vxlan.md").read_text()


def test_a_selector_on_one_side_only_shows_the_setting_that_differs(queue):
    comparison = selected(
        queue, "tunnel.kind=none,traffic.direction=upload", "tunnel.kind=wireguard"
    )
    header, body = compare.rows(comparison)
    assert "direction" in header
    cells = [row[header.index("direction")] for row in body[:2]]
    assert cells == ["upload", "upload → download"]


def test_json(l2):
    comparison = selected(l2, "tunnel.kind=none", "tunnel.kind=vxlan")
    document = json.loads(compare.render_json(comparison))
    assert (document["format"], document["format_version"], document["alpha"]) == (
        "tunnelbench-compare",
        1,
        0.05,
    )
    assert document["a"]["selector"] == "tunnel.kind=none"
    pair = document["pairs"][0]
    assert pair["a"]["goodput_mbit"] == pytest.approx([12419.549347, 14262.037837, 13304.113828])
    assert pair["a"]["median_mbit"] == pytest.approx(13304.113828)
    assert pair["b"]["config"]["tunnel"]["mtu"] == 1500
    assert pair["p_value"] == pytest.approx(0.4) and pair["method"] == "exact"
    assert pair["significant"] is False and pair["can_be_significant"] is False
    assert pair["verdict"].startswith("cannot tell with 3 and 3 runs")
    assert len(pair["ratio_ci95"]) == 2


def _trial(seq: int, config: TrialConfig, mbit_s: float) -> TrialRecord:
    return TrialRecord(
        id=seq, run_id=1, seq=seq, repetition=seq, config_key=config.key(),
        config=config, resolved=Resolved.from_dict({}), status=TrialStatus.OK, error=None,
        metrics={"goodput_bps": mbit_s * 1e6, "retransmits": 0.0},
    )  # fmt: skip


def test_enough_runs_give_a_verdict():
    """Hand-made runs of 5 repetitions (not measurements): the upload direction at
    1000 Mbit/s +- 1%, the download direction 10% faster."""
    up = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.VXLAN))
    down = TrialConfig(
        tunnel=TunnelSettings(kind=TunnelKind.VXLAN),
        traffic=TrafficSettings(direction=Direction.DOWNLOAD),
    )
    trials = [_trial(i, up, v) for i, v in enumerate([1000, 1010, 990, 1005, 995])]
    trials += [_trial(10 + i, down, v) for i, v in enumerate([1100, 1111, 1089, 1105, 1095])]
    run = RunRecord(id=1, started_at=0.0, ended_at=1.0, status=RunStatus.COMPLETE,
                    command_line="", experiment=Experiment(()),
                    environment=Environment())  # fmt: skip
    summaries = summarize_run(trials)
    pick = {d: Selector((Filter("traffic.direction", d),)) for d in Direction}
    a = compare.Side(Path("x.db"), run, summaries[:1], pick[Direction.UPLOAD])
    b = compare.Side(Path("x.db"), run, summaries[1:], pick[Direction.DOWNLOAD])
    (row,) = compare.compare(a, b).rows
    # Medians 1000 and 1100; the groups do not overlap: p = 2 / C(10, 5) = 2/252 = 0.0079.
    assert compare.short_verdict(row) == "B faster by 10.0%"
    assert row.stats is not None and row.stats.verdict.startswith("B is faster by 10.0% (95% CI ")
    assert row.stats.verdict.endswith(", p = 0.0079)")
    (reverse,) = compare.compare(b, a).rows
    assert compare.short_verdict(reverse) == "B slower by 9.1%"  # 1 - 1000/1100


def test_run_and_side_references(l2, tmp_path):
    default = tmp_path / "default.db"
    assert RunRef.parse("3", default) == RunRef(default, "3")
    assert RunRef.parse("latest", default) == RunRef(default, "latest")
    assert RunRef.parse(f"{l2}:1", default) == RunRef(l2, "1")
    assert RunRef.parse(str(l2), default) == RunRef(l2, "latest")
    for bad in ("x", f"{tmp_path}/missing.db", f"{l2}:x"):
        with pytest.raises(UserError, match="is not a run id, 'latest', a results database"):
            RunRef.parse(bad, default)
    side = SideRef.parse("7@traffic.streams=4,lab.wan.rate=1gbit", default, "A")
    assert side.run == RunRef(default, "7")
    assert side.selector == Selector(
        (Filter("traffic.streams", 4), Filter("lab.wan.rate", 1_000_000_000))
    )
    assert str(side.selector) == "traffic.streams=4,lab.wan.rate=1000mbit"
    # A database whose name holds an '@' is still a database.
    odd = tmp_path / "a@b.db"
    odd.write_bytes(l2.read_bytes())
    assert SideRef.parse(str(odd), default) == SideRef(RunRef(odd, "latest"), None)


def test_selector_values_are_parsed_like_plan_files():
    parsed = Selector.parse(
        "tunnel.mtu=auto,lab.offloads.gro=false,lab.offloads.roles=client+gw,"
        "tunnel.cpu_budget=25%,traffic.direction=download",
        "A",
    )
    assert [f.value for f in parsed.filters] == [None, False, ("client", "gw"), 0.25, "download"]


def test_only_table_markdown_json_and_html():
    assert formats.names(formats.comparing()) == ["table", "md", "html", "json"]
    with pytest.raises(UserError, match="'csv' is not available for a comparison"):
        formats.for_comparison("csv")


@pytest.mark.parametrize("width", [80, 120])
def test_the_table_fits_the_terminal_keeping_both_verdicts(queue, width):
    comparison = selected(queue, "lab.wan.queue_limit=50", "lab.wan.queue_limit=1000")
    text = compare.render_table(comparison, width)
    # Longer only where one word (the database's path) is longer than the line.
    assert all(len(line) <= width or " " not in line.strip() for line in text.splitlines())
    full = compare.render_table(comparison)
    assert max(len(line) for line in full.splitlines()) > width
    if width == 120:  # a table still: the verdicts kept, the rest named
        assert "verdict" in text and "RTT p95 verdict" in text
        assert "(left out to fit 120 columns: A retrans, B retrans, 95% CI" in text
    else:  # a paragraph a pair: every column, each named
        one = " ".join(text.split())
        assert "none · pfifo · upload: A Mbit/s 956; B Mbit/s 956; B/A 1.000;" in one
        assert "verdict too few runs (3 vs 3), within noise;" in one
        assert "RTT p95 verdict -; A retrans 87*; B retrans 0*" in one
        assert "left out" not in text
