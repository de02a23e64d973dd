"""A tuning session in every report, from a real recorded one.

tests/fixtures/runs/tune-tiny-fifo.db: `tunnelbench tune tiny-fifo.toml` (the README's
session) on the 2-core development VM: a 100 Mbit/s WAN with a 4-packet FIFO and 4
streams, 1 s trials; step 1 kept a 64-packet queue (+26%), step 2 found 256 and 1024
significantly faster by less than the 2% minimum gain, and the session ended with
nothing more to help.
"""

import json
import re
from pathlib import Path

import jsonschema
import pytest

from tests import cli_process
from tests.report_fixtures import recorded
from tunnelbench.bench import planfile
from tunnelbench.report import html, json_report, markdown, terminal, view
from tunnelbench.report import tune as tune_report

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "report-schema.json").read_text())


@pytest.fixture
def loaded(tmp_path: Path) -> view.RunView:
    return view.load(recorded("tune-tiny-fifo", tmp_path), "1")


def test_the_terminal_shows_the_path_instead_of_every_configurations_advice(loaded):
    text = terminal.render(loaded, after_run=False)
    assert "diagnosis and advice:" not in text
    assert (
        "tuning: throughput 76 Mbit/s → 95 Mbit/s (+25%) in 1 kept change; ended: nothing"
        " helped (55 s of 15m 00s)"
    ) in text
    assert "      kept: lab.wan.queue_limit 4 → 64: 76 Mbit/s → 95 Mbit/s (+26%" in text
    assert re.search(r"lab.wan.queue_limit 64 → 1024: .*: too small \(significant, but", text)
    assert "not tried: lab.wan.queue = fq_codel: lab.wan.queue: fq_codel is not available" in text
    assert text.endswith('[base.tunnel]\nkind = "none"')


def test_the_markdown_has_the_path_and_a_plan_that_runs_the_kept_configuration(loaded):
    text = markdown.render(loaded)
    assert "- **Experiment:** tuning session for throughput: each step's candidates" in text
    assert "trials: 25 (25 ok)" in text
    assert "## Tuning path" in text and "## Advice" not in text
    assert "  - kept: lab.wan.queue_limit 4 → 64: " in text
    (plan,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    (config,) = planfile.parse(plan, "final").experiment.configs
    record = tune_report.record_of(loaded.run)
    assert record is not None and config.key() == record.final_key
    assert config.lab.wan.queue_limit == 64


def test_the_json_carries_the_record_and_validates(loaded):
    document = json.loads(json_report.render(loaded))
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    tune = document["tune"]
    assert [s["number"] for s in tune["steps"]] == [0, 1, 2]
    assert tune["end"] == "nothing helped" and tune["target"] == "throughput"
    step1 = tune["steps"][1]
    assert [(c["value"], c["outcome"]) for c in step1["candidates"]] == [
        (16, "better"),
        (64, "better"),
    ]
    assert step1["alpha"] == 0.025 and step1["runs_needed"] == 5
    assert {e["value"] for e in step1["excluded"]} == {"fq_codel", "cake"}
    assert document["run"]["trial_counts"] == {"planned": 25, "ok": 25, "failed": 0, "skipped": 0}
    # Every candidate's figures are the store's: its median over its runs in the step.
    runs = {c["key"]: c["runs"] for c in document["configurations"]}
    for candidate in step1["candidates"]:
        goodputs = sorted(r["metrics"]["goodput_bps"] for r in runs[candidate["key"]])
        assert candidate["runs"] == len(goodputs) == 5
        assert candidate["median"] == goodputs[2]


def test_the_html_has_the_path_escaped_and_the_plan(loaded):
    page = html.render(loaded)
    assert '<section id="tuning"><h2>Tuning path</h2>' in page
    assert 'id="advice"' not in page
    assert "<li>kept: lab.wan.queue_limit 4 → 64: " in page
    assert "<pre>[base.lab.wan]\nrate = &quot;100mbit&quot;" in page
    assert "tuning session for throughput" in page


def test_runs_json_counts_a_tuning_session_as_planned_what_it_ran(tmp_path: Path):
    """`runs --json` said `planned: 4` (the starting plan) for a session that stored 25."""
    store = recorded("tune-tiny-fifo", tmp_path)
    db = store.path
    store.close()
    done = cli_process.run(["runs", "--json", "--db", str(db)], timeout=120)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)
    assert run["trials"] == {"stored": 25, "planned": 25, "ok": 25, "failed": 0, "skipped": 0}


def test_the_rows_follow_the_settings_and_the_summary_names_the_kept_configuration(loaded):
    """The session tried 4, 16, 64, then 256 and 1024: the tables read 4 to 1024. The
    fastest row (1024, 96 Mbit/s) was not kept (under the minimum gain); the summary
    names the one that was."""
    limits = [s.config.lab.wan.queue_limit for s in loaded.summaries]
    assert limits == [4, 16, 64, 256, 1024]
    shuffled = list(reversed(loaded.summaries))
    assert view.in_setting_order(shuffled) == loaded.summaries
    summary = html.render(loaded).split('<ul class="answer">', 1)[1].split("</ul>", 1)[0]
    assert (
        "Kept: none, 4 streams, upload, wan 100M, pfifo 64, after lab.wan.queue_limit = 64."
        in summary
    )
    assert "fastest" not in summary


def test_a_run_without_a_baseline_has_no_baseline_column_nor_mark(loaded):
    """A tuning session of a tunnel measures no no-tunnel baseline: no "% base" column
    of dashes, and no chart caption about a baseline it never drew."""
    import dataclasses

    from tunnelbench.report import charts, forum, table

    alone = [
        dataclasses.replace(s, pct_of_baseline=None, baseline_key=None) for s in loaded.summaries
    ]
    header, _ = table.rows(alone)
    assert "% base" not in header and "% base" in table.rows(loaded.summaries)[0]
    assert "% base" not in "\n".join(forum.results(alone, 100))
    note = charts.throughput_chart(alone, charts.config_labels(alone)).note
    assert "baseline" not in note and "Marks: the shaped WAN rate." in note


def test_each_step_says_which_advice_its_candidates_came_from(loaded):
    """Step 2's diagnosis is the link's limit with loss; its candidates (longer queues)
    came from the queue's advice, which the step now names beside it."""
    steps = tune_report.step_lines(tune_report.record_of(loaded.run))  # type: ignore[arg-type]
    for step in steps[1:]:
        tried = [line for line in step if line.startswith("candidates from the advice: ")]
        assert len(tried) == 1 and step.index(tried[0]) == 2  # after the diagnosis
    assert "queue" in steps[1][2]
