"""`tunnelbench report`, `report --compare` and `runs` as a user runs them: a fresh process
on a copy of a recorded run; bad input gets one line and exit code 2 and writes nothing.
Also the reports `tunnelbench run` writes next to its database at the end."""

import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from tests.cli_process import tunnelbench
from tests.conftest import FIXTURES
from tests.report_fixtures import RUNS
from tunnelbench.bench.store import Store
from tunnelbench.cli import report as reportcmd
from tunnelbench.report import html, view

GOLDEN = FIXTURES / "golden" / "reports"
SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "report-schema.json").read_text())


@pytest.fixture
def lab(tmp_path) -> Path:
    """A working directory holding copies of both recorded runs."""
    for name in ("l2-tunnel-mtu", "queue-comparison"):
        shutil.copyfile(RUNS / f"{name}.db", tmp_path / f"{name}.db")
    return tmp_path


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def test_markdown_to_stdout_is_the_golden_file(lab):
    out = ok(tunnelbench("report", "--format", "md-full", "--db", "queue-comparison.db", cwd=lab))
    assert out == (GOLDEN / "queue-comparison.md").read_text()


def test_markdown_to_a_file_with_its_charts(lab):
    (lab / "out").mkdir()
    out = ok(tunnelbench("report", "1", "--format", "md-full", "-o", "out/l2.md",
                         "--db", "l2-tunnel-mtu.db", cwd=lab))  # fmt: skip
    charts = sorted(p.name for p in (lab / "out" / "l2-charts").iterdir())
    assert out == f"wrote out/l2.md and {len(charts)} charts in out/l2-charts/\n"
    assert {"throughput.png", "mtu.png", "cpu.png"} <= set(charts)
    text = (lab / "out" / "l2.md").read_text()
    assert text.startswith((GOLDEN / "l2-tunnel-mtu.md").read_text())
    assert all(f"](l2-charts/{name})" in text for name in charts)


def test_json_validates_and_csv_has_a_row_per_trial(lab):
    doc = json.loads(ok(tunnelbench("report", "latest", "--format", "json",
                                    "--db", "queue-comparison.db", cwd=lab)))  # fmt: skip
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    out = ok(tunnelbench("report", "--format", "csv", "-o", "q.csv",
                         "--db", "queue-comparison.db", cwd=lab))  # fmt: skip
    assert out == "wrote q.csv\n"
    rows = list(csv.DictReader(io.StringIO((lab / "q.csv").read_text())))
    assert len(rows) == 48 and sum(r["status"] == "skipped" for r in rows) == 24


def test_html_and_table(lab):
    ok(tunnelbench("report", "--format", "html", "-o", "l2.html", "--db", "l2-tunnel-mtu.db",
                   cwd=lab))  # fmt: skip
    assert (lab / "l2.html").read_text().startswith("<!DOCTYPE html>")
    table = ok(tunnelbench("report", "--db", "l2-tunnel-mtu.db", cwd=lab))
    assert table.startswith("run 1 (complete): ") and " 97% " in table  # % of the baseline


def test_runs_lists_every_stored_run(lab):
    out = ok(tunnelbench("runs", "--db", "queue-comparison.db", cwd=lab))
    assert out.splitlines() == [
        "id  started                 took  plan              trials                  status",
        "--  --------------------  ------  ----------------  ----------------------  --------",
        " 1  2026-11-21 06:01 UTC  2m 53s  queue-comparison  48 (24 ok, 24 skipped)  complete",
    ]
    empty = lab / "empty.db"
    Store(empty).close()
    out = ok(tunnelbench("runs", "--db", "empty.db", cwd=lab))
    assert out == "no runs stored in empty.db yet\n"


def test_compare_two_databases(lab):
    out = ok(tunnelbench("report", "--compare", "1", "queue-comparison.db:1",
                         "--db", "l2-tunnel-mtu.db", cwd=lab))  # fmt: skip
    assert out.startswith("A: run 1 in l2-tunnel-mtu.db (l2-tunnel-mtu, ")
    assert "B: run 1 in queue-comparison.db (queue-comparison, " in out
    assert out.count("only in A") == 4 and out.count("only in B") == 16
    same = ok(tunnelbench("report", "--compare", "l2-tunnel-mtu.db", "latest", "--format", "md",
                          "--db", "l2-tunnel-mtu.db", cwd=lab))  # fmt: skip
    assert same.startswith("# Comparison: run 1 (A) and run 1 (B)")
    # A run against itself: every ratio is 1 and the rank test finds nothing (p = 1).
    flowing = " ".join(same.split())  # the Markdown's list items wrap at 100 characters
    assert flowing.count(": too few runs (3 vs 3), within noise; +0.0%, 95% CI ") == 4
    assert flowing.count(", p = 1;") == 4


def test_report_compare_is_an_alias_of_the_compare_verb(lab):
    for fmt in ("table", "md", "json"):
        args = ("l2-tunnel-mtu.db@tunnel.kind=none", "l2-tunnel-mtu.db@tunnel.kind=vxlan")
        verb = ok(tunnelbench("compare", *args, "--format", fmt, cwd=lab))
        alias = ok(tunnelbench("report", "--compare", *args, "--format", fmt, cwd=lab))
        assert verb == alias
    assert json.loads(verb)["pairs"][0]["label"] == "none → vxlan"


ERRORS = [
    (["report", "7", "--db", "l2-tunnel-mtu.db"], "run: no run 7 in 'l2-tunnel-mtu.db'"),
    (["report", "x", "--db", "l2-tunnel-mtu.db"], "run: 'x' is not a run id or 'latest'"),
    (["report", "--format", "pdf", "--db", "l2-tunnel-mtu.db"],
     "--format: unknown value 'pdf'; allowed: table, md, bbcode, md-full, html, json, csv"),
    (["report", "--format", "md", "-o", "missing/r.md", "--db", "l2-tunnel-mtu.db"],
     "-o: directory 'missing' does not exist"),
    (["report", "--format", "md", "-o", ".", "--db", "l2-tunnel-mtu.db"],
     "-o: '.' is a directory; give a file name"),
    (["report", "7", "--format", "json", "-o", "r.json", "--db", "l2-tunnel-mtu.db"],
     "run: no run 7 in 'l2-tunnel-mtu.db'"),
    (["report", "--compare", "1", "nothere.db", "--db", "l2-tunnel-mtu.db"],
     "--compare: 'nothere.db' is not a run id, 'latest', a results database or DATABASE:RUN"),
    (["report", "--compare", "1", "9", "--db", "l2-tunnel-mtu.db"],
     "run: no run 9 in 'l2-tunnel-mtu.db'"),
    (["report", "--compare", "1", "1", "--format", "csv", "--db", "l2-tunnel-mtu.db"],
     "--format: 'csv' is not available for a comparison; allowed: table, md, html, json"),
    (["compare", "1", "1", "--format", "csv", "--db", "l2-tunnel-mtu.db"],
     "--format: unknown value 'csv'; allowed: table, md, html, json"),
    (["compare", "1", "1", "-o", "nodir/c.html", "--format", "html", "--db", "l2-tunnel-mtu.db"],
     "-o: directory 'nodir' does not exist"),
    (["compare", "1@traffic.streams=4", "1@traffic.streams=1", "--db", "l2-tunnel-mtu.db"],
     "A: traffic.streams=4 matches no configuration of run 1 in l2-tunnel-mtu.db; "
     "traffic.streams there: 1"),
    (["compare", "queue-comparison.db@lab.wan.queue=fq", "queue-comparison.db@lab.wan.queue=cake"],
     "A: lab.wan.queue=fq matches no configuration of run 1 in queue-comparison.db; "
     "lab.wan.queue there: pfifo, fq_codel, cake"),
    (["compare", "1@lab.lan_mtu=9000,lab.wan.mtu=1550", "1", "--db", "l2-tunnel-mtu.db"],
     "A: no configuration of run 1 in l2-tunnel-mtu.db has lab.lan_mtu=9000 and "
     "lab.wan.mtu=1550"),
    (["compare", "1", "1@lab.wan.rate=500mbit", "--db", "queue-comparison.db"],
     "B: lab.wan.rate=500mbit matches no configuration of run 1 in queue-comparison.db; "
     "lab.wan.rate there: 1000mbit"),
    (["report", "1", "--compare", "1", "1", "--db", "l2-tunnel-mtu.db"],
     "--compare: name both runs after --compare, not '1' before it"),
    (["runs", "--db", "missing.db"], "--db: no results database at 'missing.db'"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "error"), ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_bad_input_is_one_line_and_writes_nothing(lab, args, error):
    before = sorted(p.name for p in lab.iterdir())
    done = tunnelbench(*args, cwd=lab)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"tunnelbench: error: {error}\n"
    assert sorted(p.name for p in lab.iterdir()) == before


# The captured case: `report --format json -o` naming the database replaced it with the
# JSON report, and every run stored in it was lost.
OVER_THE_DATABASE = [
    (["report", "--format", "json", "-o", "l2-tunnel-mtu.db"], "the results database"),
    (["report", "--format", "md", "-o", "./sub/../l2-tunnel-mtu.db"], "the results database"),
    (["report", "--format", "html", "-o", "link.db"], "the results database"),
    (["report", "--format", "csv", "-o", "hard.db"], "the results database"),
    (["report", "--format", "json", "-o", "l2-tunnel-mtu.db-wal"], "the -wal file of"),
    (["report", "--format", "json", "-o", "sub/../l2-tunnel-mtu.db-shm"], "the -shm file of"),
    (["report", "--format", "json", "-o", "l2-tunnel-mtu.db-journal"], "the -journal file of"),
    (["report", "--compare", "1", "queue-comparison.db", "-o", "queue-comparison.db"],
     "the results database"),
    (["compare", "1", "queue-comparison.db:1", "-o", "link.db", "--format", "html"],
     "the results database"),
    (["compare", "1", "queue-comparison.db", "-o", "queue-comparison.db-wal"],
     "the -wal file of"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "what"), OVER_THE_DATABASE, ids=[" ".join(a) for a, _ in OVER_THE_DATABASE]
)
def test_a_report_over_a_database_it_reads_is_refused(lab, args, what):
    (lab / "sub").mkdir()
    (lab / "link.db").symlink_to("l2-tunnel-mtu.db")
    (lab / "hard.db").hardlink_to(lab / "l2-tunnel-mtu.db")
    before = {p.name: p.read_bytes() for p in lab.iterdir() if p.is_file()}
    done = tunnelbench(*args, "--db", "l2-tunnel-mtu.db", cwd=lab)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    output = args[args.index("-o") + 1]
    database = "queue-comparison.db" if output.startswith("queue") else "l2-tunnel-mtu.db"
    assert done.stderr == (
        f"tunnelbench: error: -o: {output!r} is {what} {database!r}; a report there would"
        " replace the runs stored in it: give another file name\n"
    )
    assert {p.name: p.read_bytes() for p in lab.iterdir() if p.is_file()} == before
    assert "complete" in ok(tunnelbench("runs", "--db", "l2-tunnel-mtu.db", cwd=lab))


# --- the reports `tunnelbench run` writes at the end ---


def test_run_writes_html_and_markdown_next_to_the_database(lab, capsys):
    store = Store(lab / "l2-tunnel-mtu.db")
    assert reportcmd.write_reports(view.load(store, str(1)), as_json=False)
    stem = lab / "l2-tunnel-mtu-run1"
    assert capsys.readouterr().out == (
        f"reports: {stem}.html, {stem}.md (its image: {stem}-summary.png)\n"
    )
    assert Path(f"{stem}.html").read_text().startswith("<!DOCTYPE html>")
    # The Markdown is the one to paste into a post, its image beside it.
    text = Path(f"{stem}.md").read_text()
    assert "](l2-tunnel-mtu-run1-summary.png)" in text
    tables = [line for line in text.splitlines() if line.startswith("|")]
    assert tables and max(len(line) for line in tables) <= 100
    assert Path(f"{stem}-summary.png").read_bytes().startswith(b"\x89PNG")


def test_run_with_json_progress_writes_the_reports_and_keeps_its_event_stream(lab, capsys):
    """With --json the last line stays the run_finished event: nothing is printed."""
    store = Store(lab / "queue-comparison.db")
    assert reportcmd.write_reports(view.load(store, str(1)), as_json=True)
    assert capsys.readouterr().out == ""
    assert (lab / "queue-comparison-run1.html").is_file()
    assert (lab / "queue-comparison-run1.md").is_file()
    assert (lab / "queue-comparison-run1-summary.png").is_file()


def test_a_report_that_cannot_be_written_keeps_the_results(lab, capsys, monkeypatch):
    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(html, "write", full_disk)
    store = Store(lab / "l2-tunnel-mtu.db")
    assert not reportcmd.write_reports(view.load(store, str(1)), as_json=False)
    err = capsys.readouterr().err
    assert err.startswith("tunnelbench: could not write the reports ([Errno 28] No space left")
    assert "the results are stored: `tunnelbench report 1 --db " in err


def test_the_evidence_hint_names_the_database_it_needs(lab, monkeypatch):
    """Run in a database other than the default, `report 1 --format md` alone would read
    the wrong database (or none): the hint names it, quoted for the shell."""
    monkeypatch.setenv("COLUMNS", "300")  # the hint whole on one line
    spaced = lab / "my runs.db"
    shutil.copyfile(lab / "queue-comparison.db", spaced)
    done = tunnelbench("report", "1", "--db", str(spaced), cwd=lab)
    assert done.returncode == 0, done.stderr
    hint = f"(evidence: `tunnelbench report 1 --format md --db '{spaced}'`)"
    assert hint in done.stdout.splitlines()
    shown = tunnelbench("report", "1", "--format", "md", "--db", str(spaced), cwd=lab)
    assert shown.returncode == 0 and "the shaped link is the limit" in shown.stdout
