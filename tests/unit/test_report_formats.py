"""The registry of report formats (``report/formats.py``): a format registered through it
reaches ``report``, ``report --compare`` and ``compare``, their help and their shell
completion, with nothing else changed; an unknown ``--format`` is one line, exit 2.

The extra formats are registered in a fresh process (the registry is global, and the
other tests read its list of formats), which then runs the command line as a user does.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import cli_process
from tests.report_fixtures import RUNS
from tunnelbench.bench.store import Store
from tunnelbench.report import compare, formats, view

#: Two formats of a test's own, registered through the public registry, then the command
#: line on the arguments given. ``tiny`` renders a run and a comparison as one line;
#: ``tiny-file`` has no comparison, writes a file beside its report and cannot go to
#: standard output.
EXTENDED = """
import sys
from enum import StrEnum

from tunnelbench.cli.main import main
from tunnelbench.report.formats import REGISTRY, Rendering, ReportFormat, SideFiles


class Extra(StrEnum):
    TINY = "tiny"
    TINY_FILE = "tiny-file"


def run_line(view, where):
    return f"tiny run {view.run.id}: {len(view.trials)} trials, stdout={where.stdout}"


def comparison_line(comparison, where):
    return f"tiny comparison: {comparison.a.describe()} | {len(comparison.rows)} pairs"


def write_beside(view, path, where):
    path.with_suffix(".side").write_text("beside\\n")
    path.write_text(run_line(view, where) + "\\n")
    return [path, path.with_suffix(".side")]


REGISTRY.register(Extra.TINY, ReportFormat(
    Extra.TINY, title="tiny", help="one line a run", suffix=".tiny",
    run=Rendering(run_line), comparison=Rendering(comparison_line),
))
REGISTRY.register(Extra.TINY_FILE, ReportFormat(
    Extra.TINY_FILE, title="tiny", help="a file and its side file", suffix=".tiny",
    run=Rendering(run_line, SideFiles(
        lambda path: path.with_suffix(".side"), directory=False, write=write_beside,
        help="a side file as PATH with the suffix .side",
    )),
    stdout=False,
))
sys.exit(main(sys.argv[1:]))
"""

PAIR = ("l2-tunnel-mtu.db@tunnel.kind=none", "l2-tunnel-mtu.db@tunnel.kind=vxlan")


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    shutil.copyfile(RUNS / "l2-tunnel-mtu.db", tmp_path / "l2-tunnel-mtu.db")
    (tmp_path / "extended.py").write_text(EXTENDED)
    return tmp_path


def extended(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line with the two extra formats registered."""
    return subprocess.run(
        [sys.executable, "extended.py", *args],
        cwd=lab, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def tunnelbench(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_process.run(args, cwd=lab, timeout=120)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


def test_a_registered_format_reaches_report_and_compare(lab: Path, monkeypatch) -> None:
    monkeypatch.chdir(lab)  # the sides name the database as the processes below do
    store = Store.read(Path("l2-tunnel-mtu.db"))
    try:
        trials = len(view.load(store, "latest").trials)
    finally:
        store.close()
    comparison = compare.build(*PAIR, Path("l2-tunnel-mtu.db"))
    compared = f"tiny comparison: {comparison.a.describe()} | {len(comparison.rows)} pairs\n"

    report = ok(extended(lab, "report", "--format", "tiny", "--db", "l2-tunnel-mtu.db"))
    assert report == f"tiny run 1: {trials} trials, stdout=True\n"
    assert ok(extended(lab, "compare", *PAIR, "--format", "tiny")) == compared
    assert ok(extended(lab, "report", "--compare", *PAIR, "--format", "tiny")) == compared
    # Into a file: the same line, the renderer told it is not standard output.
    assert ok(extended(lab, "compare", *PAIR, "--format", "tiny", "-o", "c.tiny")) == (
        "wrote c.tiny\n"
    )
    assert (lab / "c.tiny").read_text() == compared


def test_a_format_with_a_side_file_writes_both_and_needs_a_file(lab: Path) -> None:
    args = ("report", "--format", "tiny-file", "--db", "l2-tunnel-mtu.db")
    assert ok(extended(lab, *args, "-o", "r.tiny")) == "wrote r.tiny and r.side\n"
    assert (lab / "r.tiny").read_text().endswith(", stdout=False\n")
    assert (lab / "r.side").read_text() == "beside\n"
    done = extended(lab, *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "tunnelbench: error: --format: a tiny report (tiny-file) cannot go to standard"
        " output; give -o PATH\n"
    )
    # No comparison: compare does not offer it, report --compare refuses it by name.
    done = extended(lab, "report", "--compare", *PAIR, "--format", "tiny-file")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "tunnelbench: error: --format: 'tiny-file' is not available for a comparison;"
        " allowed: table, md, html, json, tiny; did you mean 'tiny'?\n"
    )


def test_help_and_completion_list_a_registered_format(lab: Path) -> None:
    script = ok(extended(lab, "completion", "bash"))
    assert (
        '"/report --format") COMPREPLY=( $(compgen -W \'table md bbcode md-full html json csv'
        ' tiny tiny-file\' -- "$cur") )'
    ) in script
    assert (
        '"/compare --format") COMPREPLY=( $(compgen -W \'table md html json tiny\' -- "$cur") )'
    ) in script
    helped = " ".join(ok(extended(lab, "report", "--help")).split())
    assert "; tiny: one line a run; tiny-file: a file and its side file" in helped
    assert "; tiny-file also writes a side file as PATH with the suffix .side" in helped


UNKNOWN = [
    (["report", "--format", "pdf"],
     "--format: unknown value 'pdf'; allowed: table, md, bbcode, md-full, html, json, csv"),
    (["compare", "1", "1", "--format", "htlm"],
     "--format: unknown value 'htlm'; allowed: table, md, html, json; did you mean 'html'?"),
    (["compare", "1", "1", "--format", "bbcode", "-o", "c.txt"],
     "--format: unknown value 'bbcode'; allowed: table, md, html, json"),
    (["report", "--compare", "1", "1", "--format", "md-full", "-o", "c.md"],
     "--format: 'md-full' is not available for a comparison; allowed: table, md, html, json"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "error"), UNKNOWN, ids=[" ".join(a) for a, _ in UNKNOWN])
def test_an_unknown_format_is_one_line_and_exit_2(lab: Path, args: list[str], error: str) -> None:
    before = sorted(p.name for p in lab.iterdir())
    done = tunnelbench(lab, *args, "--db", "l2-tunnel-mtu.db")
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"tunnelbench: error: {error}\n")
    assert sorted(p.name for p in lab.iterdir()) == before


def test_every_shipped_format_is_registered_in_its_order() -> None:
    shipped = [str(name) for name in formats.FormatName]
    assert formats.names() == shipped
    assert all(formats.named(name).name == name for name in shipped)
    assert formats.names([f for f in formats.all_formats() if f.fits_width]) == ["md", "bbcode"]
