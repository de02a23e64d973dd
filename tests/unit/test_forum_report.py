"""The Markdown to paste into a forum post (``report --format md``): golden files at 80
and 120 columns; the result first (title, table, verdicts) and the environment folded
last; every table line within the width asked for on every recorded run, at most five
columns a table and none left out; prose one line a paragraph; one image beside it that
shows the run. The same post in BBCode (``--format bbcode``) for phpBB forums.

The golden files were generated once and read line by line against the full report of
the same runs (``md-full``): the same medians, intervals, % of baseline and verdicts.
"""

import re
import shutil

import pytest

from tests.cli_process import tunnelbench
from tests.conftest import FIXTURES
from tests.report_fixtures import RUNS, recorded, wide
from tunnelbench.report import bbcode, forum, view

GOLDEN = FIXTURES / "golden" / "forum"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RUN_FIXTURES = sorted(p.stem for p in RUNS.glob("*.db"))
NOT_A_WIDTH = "is not a whole number of columns from 80 to 400"
ONLY_MD = "only --format md or bbcode has a line width"


def _tables(text: str) -> list[list[str]]:
    """Each pipe table's lines."""
    tables: list[list[str]] = []
    previous = False
    for line in text.splitlines():
        if line.startswith("|"):
            if not previous:
                tables.append([])
            tables[-1].append(line)
        previous = line.startswith("|")
    return tables


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", ["l2-tunnel-mtu", "queue-comparison"])
def test_the_report_at_a_width_is_the_golden_file(tmp_path, name, width):
    text = forum.render(view.load(recorded(name, tmp_path), "latest"), width)
    assert text == (GOLDEN / f"{name}-{width}.md").read_text()


def _columns(loaded: view.RunView) -> int:
    """The columns a table of the run has: every one the run has figures for."""
    summaries = loaded.summaries
    latency = any(s.latency is not None for s in summaries)
    return 3 + latency + any(s.pct_of_baseline is not None for s in summaries)


@pytest.mark.parametrize("name", RUN_FIXTURES)
def test_every_table_fits_has_at_most_five_columns_and_leaves_none_out(tmp_path, name):
    loaded = view.load(recorded(name, tmp_path), "latest")
    for width in (80, 100, 132):
        text = forum.render(loaded, width)
        tables = _tables(text)
        assert tables, (name, width)
        for table in tables:
            long = [line for line in table if len(line) > width]
            assert not long, (name, width, long)
            assert table[0].count(" | ") + 1 == _columns(loaded) <= 5, table[0]
            assert len({line.count(" | ") for line in table}) == 1, table  # no stray pipe
        assert "left out" not in text


def _prose_lines(text: str) -> list[tuple[str, str]]:
    """Each line outside tables and fenced code, with the line before it."""
    plain = re.sub(r"```.*?```", "", text, flags=re.S).splitlines()
    return [
        (before, line) for before, line in zip(["", *plain], plain, strict=False) if line[:1] != "|"
    ]


@pytest.mark.parametrize("name", RUN_FIXTURES)
def test_prose_is_one_line_a_paragraph(tmp_path, name):
    """Discourse keeps a post's line breaks: a paragraph or list item hard-wrapped at 80
    columns shows ragged in its wider column. So a line of prose follows a blank line or
    is a list item (or a heading, or the folded block's tags)."""
    text = forum.render(view.load(recorded(name, tmp_path), "latest"), 80)
    starts = ("- ", "  - ", "#", "<", "**", "![")
    continued = [
        line
        for before, line in _prose_lines(text)
        if line and before and not line.startswith(starts)
    ]
    assert not continued, (name, continued)
    assert any(len(line) > 80 for _, line in _prose_lines(text))  # a long paragraph, whole


def test_the_post_opens_with_its_result_and_folds_the_environment(tmp_path):
    """A title, the table, the verdicts; local paths and versions folded at the end."""
    text = forum.render(view.load(recorded("wireguard-implementations", tmp_path), "latest"))
    lines = text.splitlines()
    assert lines[0] == "# benchmark: tunnelbench run 1"
    assert lines[1] == "" and lines[2].startswith("| configuration ")
    order = [lines.index(h) for h in ("## Diagnosis", "## Advice", "## Details", "<details>")]
    assert order == sorted(order)
    folded = lines[lines.index("<details>") :]
    assert folded[1] == f"<summary>{forum.ENVIRONMENT}</summary>" and folded[-1] == "</details>"
    for key in ("Run", "Command", "Machine", "Software"):
        (line,) = [n for n, line in enumerate(lines) if line.startswith(f"- **{key}:**")]
        assert line > lines.index("<details>"), key
    # What was measured stays in view, above the fold.
    above = lines[: lines.index("<details>")]
    assert any(line.startswith("- **Common settings:**") for line in above)
    assert "upload it" not in text


def test_a_table_too_wide_shortens_its_cells_rather_than_leave_a_column_out(tmp_path):
    """At 100 columns the names and intervals of the WireGuard implementations made
    lines of 101-102 characters; the interval moves to the list under the table (its
    cells show the median), and at 80 the longest names are elided in the middle."""
    loaded = view.load(recorded("wireguard-implementations", tmp_path), "latest")
    wide_text = forum.render(loaded, 132)
    assert "| wireguard (wireguard-go-debian) · streams 1 |          606 (578-634) |" in wide_text
    at_100 = forum.render(loaded, 100)
    assert "| wireguard (wireguard-go-debian) · streams 1 |    606 |" in at_100
    assert "median 606 Mbit/s, 95% CI 578-634" in at_100
    at_80 = forum.render(loaded, 80)
    assert "| wireguard (w…d-go-debian) |    606 |" in at_80
    assert "**wireguard (wireguard-go-debian) · streams 1**: median 606 Mbit/s" in at_80


def test_fifty_configurations_fit_in_tables_split_by_their_settings(tmp_path):
    text = forum.render(view.load(wide(tmp_path), "latest"), 80)
    assert max(len(line) for table in _tables(text) for line in table) <= 80
    # 5 MTUs x 5 stream counts: a table each, its rows the tunnel and the tunnel's MTU.
    assert len(_tables(text)) == 25
    assert "**LAN MTU 1280 · WAN MTU 1330 · streams 1**" in text
    assert "| vxlan · tun MTU 1280 |" in text


def test_the_image_beside_the_report_shows_the_run(tmp_path):
    loaded = view.load(recorded("queue-comparison", tmp_path), "latest")
    path = tmp_path / "post.md"
    written = forum.write(loaded, path)
    image = tmp_path / "post-summary.png"
    assert written == [path, image]
    assert image.read_bytes().startswith(PNG_SIGNATURE)
    assert image.stat().st_size > 10_000  # bars drawn, not an empty canvas
    text = path.read_text()
    # The image under the table; no word to the poster about it in the post.
    linked = "![queue-comparison: run 1 at a glance](post-summary.png)"
    lines = text.splitlines()
    at = lines.index(linked)
    assert lines[at - 1] == "" and lines[at - 2].startswith("| ")
    assert "upload it" not in text
    # Everything else is the report without its image.
    assert "\n".join(lines[: at - 1] + lines[at + 1 :]) + "\n" == forum.render(loaded)
    assert "![" not in forum.render(loaded)


def test_a_run_with_nothing_measured_has_no_image(tmp_path):
    store = recorded("queue-comparison", tmp_path)
    store.db.execute("UPDATE trials SET status = 'failed', error = 'iperf3 | exited 1'")
    path = tmp_path / "post.md"
    assert forum.write(view.load(store, "latest"), path) == [path]
    assert not (tmp_path / "post-summary.png").exists()
    assert "![" not in path.read_text()


def test_report_writes_the_post_and_its_image_and_md_full_everything(tmp_path):
    shutil.copyfile(RUNS / "l2-tunnel-mtu.db", tmp_path / "r.db")
    done = tunnelbench("report", "--format", "md", "-o", "post.md", "--db", "r.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "wrote post.md and post-summary.png\n"
    assert (tmp_path / "post-summary.png").read_bytes().startswith(PNG_SIGNATURE)
    narrow = tunnelbench("report", "--format", "md", "--width", "80", "--db", "r.db", cwd=tmp_path)
    assert narrow.returncode == 0, narrow.stderr
    assert max(len(line) for table in _tables(narrow.stdout) for line in table) <= 80
    full = tunnelbench(
        "report", "--format", "md-full", "-o", "full.md", "--db", "r.db", cwd=tmp_path
    )
    assert full.returncode == 0, full.stderr
    assert (tmp_path / "full-charts" / "throughput.png").is_file()
    assert "| busiest core (usr/sys/soft %) |" in (tmp_path / "full.md").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "md", "--width", "79"], f"--width: '79' {NOT_A_WIDTH}"),
        (["--format", "md", "--width", "wide"], f"--width: 'wide' {NOT_A_WIDTH}"),
        (["--format", "html", "--width", "100"], f"--width: {ONLY_MD}, not html"),
    ],
)
def test_a_bad_width_is_refused_before_anything_is_written(tmp_path, args, message):
    shutil.copyfile(RUNS / "l2-tunnel-mtu.db", tmp_path / "r.db")
    done = tunnelbench("report", *args, "-o", "out.md", "--db", "r.db", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"tunnelbench: error: {message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db"]


@pytest.mark.parametrize("name", ["queue-comparison", "tune-tiny-fifo"])
def test_the_bbcode_post_is_the_golden_file(tmp_path, name):
    """phpBB (the MikroTik forum) has no Markdown and, by default, no [table]: the
    results are a monospaced table in [code], lists are [list], headings [b]."""
    text = bbcode.render(view.load(recorded(name, tmp_path), "latest"), 80)
    assert text == (GOLDEN / f"{name}-80.bbcode").read_text()


@pytest.mark.parametrize("name", RUN_FIXTURES)
def test_the_bbcode_post_has_no_markdown_left_and_its_table_fits(tmp_path, name):
    loaded = view.load(recorded(name, tmp_path), "latest")
    text = bbcode.render(loaded, 80)
    assert "**" not in text and "| " not in text and "<details>" not in text
    assert "![" not in text and not re.search(r"^#", text, flags=re.M)
    assert text.count("[list]") == text.count("[/list]")
    assert text.count("[code]") == text.count("[/code]") >= 1
    table = text[text.index("[code]\n") + 7 : text.index("\n[/code]")].splitlines()
    assert max(map(len, table)) <= 80
    assert any(line.startswith("configuration  ") for line in table)
    # The same figures as the Markdown post.
    markdown_rows = [line for t in _tables(forum.render(loaded, 80)) for line in t[2:]]
    first = [c.strip() for c in markdown_rows[0].strip("| ").split(" | ")]
    assert any(all(c in line for c in first) for line in table), first


def test_report_format_bbcode_writes_the_post(tmp_path):
    shutil.copyfile(RUNS / "queue-comparison.db", tmp_path / "r.db")
    done = tunnelbench(
        "report", "--format", "bbcode", "--width", "80", "-o", "post.txt", "--db", "r.db",
        cwd=tmp_path,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "wrote post.txt\n", "")
    assert (tmp_path / "post.txt").read_text() == (
        GOLDEN / "queue-comparison-80.bbcode"
    ).read_text()
