"""The CI gate cannot pass by pairing nothing (issue 42): two runs that differ in one
setting pair by it, saying the rule; what would be a guess is refused; a gate that
compared nothing, or whose B side failed, exits 1 naming why (the command line run in
this process, as the CLI fuzz tests run it); and compare's outputs (a factor for a ratio
above 2, the forest rows, the forum Markdown's width) on the same runs.

The runs are the recorded fixture runs, each split in two databases by one setting
(``base.db`` keeps the trials of one value, ``new.db`` of another): real trials, as two
runs of plans that differ in that setting store them. A B side that failed is the same
split with its WireGuard trials marked failed the way the runner stores a failed trial
(status failed, no metrics), with the error iperf3's real "connection refused" output
gives.
"""

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.report_fixtures import RUNS
from tests.unit.fuzz_harness import Outcome, run_main
from tunnelbench.errors import LabError
from tunnelbench.report import compare, compare_markdown, compare_page
from tunnelbench.traffic import iperf3_json

STREAMS = "json_extract(config, '$.traffic.streams')"
LIMIT = "json_extract(config, '$.lab.wan.queue_limit')"
WIREGUARD = "json_extract(config, '$.tunnel.kind') = 'wireguard'"
GATE = ("--fail-if-slower", "5", "--fail-if-latency-worse", "50")


def tunnelbench(*args: str, cwd: Path) -> Outcome:
    """The command line run in this process (as the CLI fuzz tests run it): a gate's
    exit code, standard output and standard error, without a Python start each."""
    before = Path.cwd()
    os.chdir(cwd)
    try:
        return run_main(args)
    finally:
        os.chdir(before)


def split(name: str, path: Path, keep: str) -> Path:
    """A copy of the recorded run ``name`` at ``path`` with only the trials ``keep`` (an
    SQL condition on the trials table) selects."""
    shutil.copyfile(RUNS / f"{name}.db", path)
    db = sqlite3.connect(path)
    with db:
        gone = f"SELECT id FROM trials WHERE NOT ({keep})"
        for table in ("metrics", "artifacts"):
            db.execute(f"DELETE FROM {table} WHERE trial_id IN ({gone})")
        db.execute(f"DELETE FROM trials WHERE NOT ({keep})")
    db.close()
    return path


def connection_refused() -> str:
    """The error a trial stores when iperf3's client finds no server (real output)."""
    doc = json.loads((FIXTURES / "iperf3" / "connection-refused.json").read_text())
    with pytest.raises(LabError) as caught:
        iperf3_json.parse(doc, duration=2)
    return str(caught.value)


def fail(path: Path, which: str) -> None:
    """Mark the trials ``which`` selects failed, as the runner stores a failed trial."""
    db = sqlite3.connect(path)
    with db:
        chosen = f"SELECT id FROM trials WHERE {which}"
        for table in ("metrics", "artifacts"):
            db.execute(f"DELETE FROM {table} WHERE trial_id IN ({chosen})")
        db.execute(
            f"UPDATE trials SET status = 'failed', error = ? WHERE {which}",
            (connection_refused(),),
        )
    db.close()


@pytest.fixture
def streams(tmp_path: Path) -> Path:
    """base.db: the 5-run fixture's 1-stream trials; new.db: its 4-stream trials."""
    split("streams-5-runs", tmp_path / "base.db", f"{STREAMS} = 1")
    split("streams-5-runs", tmp_path / "new.db", f"{STREAMS} = 4")
    return tmp_path


def test_two_runs_that_differ_in_one_setting_pair_by_it(streams):
    comparison = compare.build(str(streams / "base.db"), str(streams / "new.db"), Path("x"))
    rule = comparison.pairing
    assert (rule.setting, rule.a_value, rule.b_value, rule.refused) == (
        "traffic.streams", 1, 4, None
    )  # fmt: skip
    assert rule.text == "paired by differing traffic.streams: 1 → 4"
    assert [(r.a.config.traffic.streams, r.b.config.traffic.streams) for r in comparison.rows] == [  # type: ignore[union-attr]
        (1, 4),
        (1, 4),
    ]
    assert [r.summary.label for r in comparison.rows] == ["none", "wireguard (wireguard-go)"]
    assert "Paired by differing traffic.streams: 1 → 4." in compare.render_table(comparison)
    assert "<br>Paired by differing traffic.streams: 1 → 4.</p>" in compare_page.page(comparison)
    document = json.loads(compare.render_json(comparison))
    assert document["pairing"] == {
        "rule": "one differing setting", "setting": "traffic.streams", "a": 1, "b": 4,
        "refused": None, "text": "paired by differing traffic.streams: 1 → 4",
    }  # fmt: skip
    assert document["pairs"][1]["changed"] == [{"path": "traffic.streams", "a": 1, "b": 4}]


def test_the_gate_catches_the_regression_it_used_to_pass(streams):
    # The command line: the wireguard-go round trip 15.8 -> 29.6 ms (+88%).
    done = tunnelbench("compare", "base.db", "new.db", *GATE, cwd=streams)
    assert done.code == 1, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "compare: paired by differing traffic.streams: 1 → 4"
    (worse,) = [line for line in lines if "loaded RTT worse" in line]
    assert worse.startswith(
        "compare: loaded RTT worse by more than 50%: wireguard (wireguard-go), streams 1 → 4:"
        " B's loaded RTT p95 is higher by 87.8%"
    )
    # Without a gate the comparison is only shown: exit 0, nothing on standard error.
    shown = tunnelbench("compare", "base.db", "new.db", cwd=streams)
    assert shown.code == 0 and shown.stderr == ""


def test_a_gate_that_pairs_nothing_fails_and_says_why(tmp_path):
    for name in ("l2-tunnel-mtu", "queue-comparison"):
        shutil.copyfile(RUNS / f"{name}.db", tmp_path / f"{name}.db")
    done = tunnelbench("compare", "l2-tunnel-mtu.db", "queue-comparison.db", *GATE, cwd=tmp_path)
    assert done.code == 1
    lines = done.stderr.splitlines()
    assert lines[0] == (
        "compare: the gate compared nothing: no configuration of A (run 1 in l2-tunnel-mtu.db)"
        " paired with one of B (run 1 in queue-comparison.db) where both measured goodput"
    )
    assert lines[1].startswith("compare: not paired by one differing setting: A's none ")
    assert lines[1].endswith(
        "differs from each of B's unpaired configurations in more than one setting"
    )
    only_a = [line for line in lines if line.startswith("compare: not judged: ")]
    assert len(only_a) == 4  # l2's four configurations
    assert all(line.endswith(": only in A: B has no configuration to compare it with")
               for line in only_a)  # fmt: skip
    # B's own configurations are new, not a failure of the gate: named, as notes.
    assert sum(line.startswith("compare: note: ") for line in lines) == 16
    shown = tunnelbench("compare", "l2-tunnel-mtu.db", "queue-comparison.db", cwd=tmp_path)
    assert shown.code == 0 and shown.stderr == ""


def test_a_b_side_that_failed_fails_the_gate(streams):
    fail(streams / "new.db", WIREGUARD)
    done = tunnelbench("compare", "base.db", "new.db", "--fail-if-slower", "5", cwd=streams)
    assert done.code == 1
    (line,) = [line for line in done.stderr.splitlines() if "not judged" in line]
    assert line.startswith(
        "compare: not judged: wireguard (wireguard-go), streams 1 → 4: B failed: 5 of 5 runs"
        " failed (last: "
    )
    assert "Connection refused" in line
    assert "| failed " in tunnelbench("compare", "base.db", "new.db", "--format", "md",
                                      cwd=streams).stdout  # fmt: skip
    # The baseline still compares, and passes; a gate on latency alone fails the same way.
    latency = tunnelbench("compare", "base.db", "new.db", "--fail-if-latency-above", "1000",
                          cwd=streams)  # fmt: skip
    assert latency.code == 1 and "B failed: 5 of 5 runs failed" in latency.stderr


def test_two_partners_for_one_configuration_are_refused(tmp_path):
    # A: the tiny-FIFO run's 4-packet queue; B: its 16- and 64-packet queues. Either
    # could be "the" partner: no guess.
    split("tune-tiny-fifo", tmp_path / "base.db", f"{LIMIT} = 4")
    split("tune-tiny-fifo", tmp_path / "new.db", f"{LIMIT} IN (16, 64)")
    comparison = compare.build(str(tmp_path / "base.db"), str(tmp_path / "new.db"), Path("x"))
    assert comparison.pairing.setting is None
    assert comparison.pairing.refused == (
        "ambiguous: A's none differs in one setting from 2 of B's configurations"
        " (lab.wan.queue_limit=16, lab.wan.queue_limit=64); pick one with a selector"
    )
    assert [compare.short_verdict(r) for r in comparison.rows] == ["only in A", *["only in B"] * 2]
    done = tunnelbench("compare", "base.db", "new.db", *GATE, cwd=tmp_path)
    assert done.code == 1
    assert done.stderr.splitlines()[1] == f"compare: {comparison.pairing.text}"
    # Selectors say what to pair: then the gate compares, and passes (B is faster).
    chosen = tunnelbench("compare", "base.db", "new.db@lab.wan.queue_limit=16",
                         "--fail-if-slower", "5", cwd=tmp_path)  # fmt: skip
    assert chosen.code == 0, chosen.stderr


def test_a_setting_both_runs_also_share_is_not_a_rule(tmp_path):
    # A: queues of 4 and 16 packets; B: 4 and 64. The 4s pair as equal; "16 → 64" would
    # be a guess: the queue limit is a setting both runs vary.
    split("tune-tiny-fifo", tmp_path / "base.db", f"{LIMIT} IN (4, 16)")
    split("tune-tiny-fifo", tmp_path / "new.db", f"{LIMIT} IN (4, 64)")
    comparison = compare.build(str(tmp_path / "base.db"), str(tmp_path / "new.db"), Path("x"))
    assert comparison.pairing.refused is not None
    assert comparison.pairing.refused.startswith(
        "ambiguous: lab.wan.queue_limit is also a setting both runs share"
    )
    sides = [(r.a is not None, r.b is not None) for r in comparison.rows]
    assert sides == [(True, True), (True, False), (False, True)]


def test_a_ratio_above_twice_reads_as_a_factor(tmp_path):
    # 4 against 1024 packets on a 100 Mbit/s FIFO: the loaded p95 round trip rose from
    # about 1 ms to about 80 ms. "+7,790%" says it badly.
    shutil.copyfile(RUNS / "tune-tiny-fifo.db", tmp_path / "f.db")
    db = tmp_path / "f.db"
    comparison = compare.build(
        f"{db}@lab.wan.queue_limit=4", f"{db}@lab.wan.queue_limit=1024", Path("x")
    )
    (row,) = comparison.rows
    stats = row.latency_stats
    assert stats is not None and stats.ratio is not None and stats.ratio > 50
    assert compare.short_latency_verdict(row) == f"B higher \u00d7 {stats.ratio:.1f}"
    sentence = compare.latency_verdict(stats)
    assert sentence.startswith(
        f"B's loaded RTT p95 is higher \u00d7 {stats.ratio:.1f} (95% CI \u00d7 "
    )
    assert "%" not in sentence.split("(")[0]
    # Goodput rose 25.9%: below twice, a percentage.
    assert compare.short_verdict(row) == "B faster by 25.9%"


def test_forest_rows_name_the_setting_that_changed(streams):
    by_rule = compare.build(str(streams / "base.db"), str(streams / "new.db"), Path("x"))
    forest = compare_page.forest_chart(by_rule)
    assert forest is not None
    assert forest.categories == ("none, streams 1 → 4", "wireguard (wireguard-go), streams 1 → 4")
    # A selector fixes the setting on each side: no column shows it, the rows still do.
    shutil.copyfile(RUNS / "streams-5-runs.db", streams / "s.db")
    db = streams / "s.db"
    selected = compare.build(f"{db}@traffic.streams=1", f"{db}@traffic.streams=4", Path("x"))
    forest = compare_page.forest_chart(selected)
    assert forest is not None
    assert forest.categories == ("none, streams 1 → 4", "wireguard (wireguard-go), streams 1 → 4")


def test_a_test_that_calls_no_difference_is_not_decided(streams):
    comparison = compare.build(str(streams / "base.db"), str(streams / "new.db"), Path("x"))
    wireguard = comparison.rows[1]
    # wireguard-go: 1,541 -> 1,293 Mbit/s, p = 0.84, the interval -40%..+87%: nothing
    # shows the two are equal.
    assert compare.short_verdict(wireguard) == "not decided"
    assert wireguard.verdict == "not decided (-16.1%, 95% CI -40.5%..+87.2%, p = 0.84)"
    assert not wireguard.equivalent
    table = compare.render_table(comparison)
    assert "no significant difference" not in table and "not decided" in table
    assert "Not decided: the rank test did not call a difference" in table


MD_CASES = [
    ("base.db", "new.db"),
    ("l2-tunnel-mtu.db", "queue-comparison.db"),
    ("queue-comparison.db@lab.wan.queue_limit=50", "queue-comparison.db@lab.wan.queue_limit=1000"),
    ("l2-tunnel-mtu.db@tunnel.kind=none", "l2-tunnel-mtu.db@tunnel.kind=vxlan"),
    (
        "wireguard-implementations.db@traffic.streams=1",
        "wireguard-implementations.db@traffic.streams=4",
    ),
]


@pytest.mark.parametrize(("a", "b"), MD_CASES)
def test_the_forum_markdown_tables_fit_100_columns(streams, monkeypatch, a, b):
    for db in RUNS.glob("*.db"):
        shutil.copyfile(db, streams / db.name)
    monkeypatch.chdir(streams)
    comparison = compare.build(a, b, Path("x"))
    text = compare_markdown.render(comparison)
    lines = text.splitlines()
    # A pipe table cannot wrap: it fits 100 columns, or is left out, saying so.
    tables = [line for line in lines if line.startswith("|")]
    assert all(len(line) <= 100 for line in tables), max(tables, key=len)
    assert tables or "(No table: its rows would be wider than 100 characters.)" in lines
    # Prose and list items are not hard-wrapped (Discourse keeps line breaks): no line
    # continues the one before it.
    assert not [line for line in lines if line.startswith("  ") and not line.startswith("  - ")]
    # Every pair is in the list under the table with its verdicts' figures; the JSON
    # keeps every number.
    assert sum(line.startswith("- **") for line in lines) >= len(comparison.rows)
    pairs = json.loads(compare.render_json(comparison))["pairs"]
    assert len(pairs) == len(comparison.rows)


def test_the_markdown_of_two_runs_is_a_five_column_table(streams):
    comparison = compare.build(str(streams / "base.db"), str(streams / "new.db"), Path("x"))
    text = compare_markdown.render(comparison)
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert table[0].split("|")[1:-1] == [
        " configuration            ", "    Mbit/s A→B ", " goodput           ",
        " RTT p95 ms A→B ", " RTT p95         ",
    ]  # fmt: skip
    assert table[2].startswith("| none                     | 12,663→18,997 | B faster by 50.0%")
    assert "- **Changed in every pair (A → B):** streams 1 → 4" in text
    assert "- **Pairing:** Paired by differing traffic.streams: 1 → 4." in text
