"""A report's files are written whole or not at all and never over a database, whatever
names it: a descriptor's link opened later (``/proc/self/fd/N``), the image a Markdown
report writes beside ``-o``. Real files, real SQLite databases, real signals."""

import hashlib
import os
import shutil
import signal
import stat
from pathlib import Path

import pytest

from tests.cli_process import tunnelbench
from tests.report_fixtures import RUNS
from tunnelbench.bench.store import Store
from tunnelbench.cli import report as reportcmd
from tunnelbench.report import files, forum, view
from tunnelbench.system import interrupts


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    shutil.copyfile(RUNS / "queue-comparison.db", tmp_path / "q.db")
    return tmp_path


def test_a_descriptor_link_to_an_open_database_is_refused(lab):
    before = _digest(lab / "q.db")
    with open(lab / "q.db", "rb") as held:
        link = Path(f"/proc/self/fd/{held.fileno()}")
        with pytest.raises(files.WouldReplaceDatabase, match="holds an SQLite database"):
            files.replace(link, '{"json": 1}')
    assert _digest(lab / "q.db") == before


def test_the_image_beside_a_forum_post_is_checked_against_the_database_read(lab):
    (lab / "q.db").rename(lab / "post-summary.png")
    before = _digest(lab / "post-summary.png")
    done = tunnelbench(
        "report", "--db", "post-summary.png", "--format", "md", "-o", "post.md", cwd=lab
    )
    assert done.returncode == 2
    assert "'post.md' writes its image as 'post-summary.png', which is the results" in done.stderr
    assert _digest(lab / "post-summary.png") == before
    assert not (lab / "post.md").exists()


def test_another_database_where_the_image_goes_is_kept_and_no_post_is_written(lab):
    shutil.copyfile(lab / "q.db", lab / "post-summary.png")
    before = _digest(lab / "post-summary.png")
    done = tunnelbench("report", "--db", "q.db", "--format", "md", "-o", "post.md", cwd=lab)
    assert done.returncode == 2
    assert "holds an SQLite database" in done.stderr
    assert _digest(lab / "post-summary.png") == before
    # The image comes first: the post that would link it was never written.
    assert not (lab / "post.md").exists()


def test_a_replaced_file_keeps_its_mode_and_a_link_stays_a_link(tmp_path):
    real = tmp_path / "real.html"
    real.write_text("old")
    real.chmod(0o640)
    (tmp_path / "link.html").symlink_to(real)
    files.replace(tmp_path / "link.html", "new")
    assert (tmp_path / "link.html").is_symlink()
    assert real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.html", "real.html"]


def test_the_post_is_written_after_its_image(tmp_path, lab):
    """An image that cannot be written leaves no post that links it."""
    store = Store.read(lab / "q.db")
    loaded = view.load(store, "1")
    post = tmp_path / "out.md"
    forum.summary_path(post).mkdir()  # where the image goes, a directory
    with pytest.raises(OSError):
        forum.write(loaded, post)
    assert not post.exists()


def test_an_interrupt_while_the_reports_are_written_leaves_none(lab, capsys):
    store = Store(lab / "q.db")
    loaded = view.load(store, "1")
    with interrupts.installed():
        os.kill(os.getpid(), signal.SIGINT)  # noted, as one that lands mid-write is
        with pytest.raises(interrupts.Interrupted) as raised:
            reportcmd.write_reports(loaded, as_json=False)
    store.close()
    assert str(raised.value).startswith(
        "interrupted while the reports were written: run 1 is stored (complete) and no"
        " report of it was written; `tunnelbench report 1 --db "
    )
    assert sorted(p.name for p in lab.iterdir()) == ["q.db"]
