"""The Markdown to paste into a forum post (``report --format md``): golden files at 80
and 120 columns, every line within the width asked for on every recorded run, at most
five columns a table, and one image beside it that shows the run.

The golden files were generated once and read line by line against the full report of
the same runs (``md-full``): the same medians, intervals, % of baseline and verdicts.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.report_fixtures import RUNS, recorded, wide
from tunnelbench.report import forum, view

GOLDEN = FIXTURES / "golden" / "forum"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RUN_FIXTURES = sorted(p.stem for p in RUNS.glob("*.db"))
NOT_A_WIDTH = "is not a whole number of columns from 80 to 400"
ONLY_MD = "only --format md has a line width"


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


@pytest.mark.parametrize("name", RUN_FIXTURES)
def test_every_line_fits_and_every_table_has_at_most_five_columns(tmp_path, name):
    loaded = view.load(recorded(name, tmp_path), "latest")
    for width in (80, 100, 132):
        text = forum.render(loaded, width)
        # A fenced code block (a tuning session's final plan) is pasted whole.
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        long = [line for line in prose.splitlines() if len(line) > width]
        assert not long, (name, width, long)
        for table in _tables(text):
            assert table[0].count(" | ") + 1 <= 5, table[0]
            assert len({line.count(" | ") for line in table}) == 1, table  # no stray pipe


def test_fifty_configurations_fit_in_tables_split_by_their_settings(tmp_path):
    text = forum.render(view.load(wide(tmp_path), "latest"), 80)
    assert max(len(line) for line in text.splitlines()) <= 80
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
    assert "![queue-comparison: run 1 at a glance](post-summary.png)" in text
    assert "upload it with the post" in text
    # Everything else is the report without its image.
    linked = ["", "![queue-comparison: run 1 at a glance](post-summary.png)", ""]
    lines = text.splitlines()
    at = lines.index(linked[1])
    note = lines[at + 2 : lines.index("", at + 2)]
    assert "(The image is `post-summary.png`" in note[0]
    shown = lines[: at - 1] + lines[at + 2 + len(note) :]
    assert "\n".join(shown) + "\n" == forum.render(loaded)
    without = forum.render(loaded)
    assert "![" not in without and "upload it" not in without


def test_a_run_with_nothing_measured_has_no_image(tmp_path):
    store = recorded("queue-comparison", tmp_path)
    store.db.execute("UPDATE trials SET status = 'failed', error = 'iperf3 | exited 1'")
    path = tmp_path / "post.md"
    assert forum.write(view.load(store, "latest"), path) == [path]
    assert not (tmp_path / "post-summary.png").exists()
    assert "![" not in path.read_text()


def tunnelbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunnelbench", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_report_writes_the_post_and_its_image_and_md_full_everything(tmp_path):
    shutil.copyfile(RUNS / "l2-tunnel-mtu.db", tmp_path / "r.db")
    done = tunnelbench("report", "--format", "md", "-o", "post.md", "--db", "r.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "wrote post.md and post-summary.png\n"
    assert (tmp_path / "post-summary.png").read_bytes().startswith(PNG_SIGNATURE)
    narrow = tunnelbench("report", "--format", "md", "--width", "80", "--db", "r.db", cwd=tmp_path)
    assert narrow.returncode == 0, narrow.stderr
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 80
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
