"""A program's version is asked once per program file, and asked again once the file
changed: the answers are kept on disk for later commands and for VM guests."""

import json
import os
import stat
import time
from pathlib import Path

import pytest

from tunnelbench.errors import UserError
from tunnelbench.system import versions
from tunnelbench.system.command import CommandError


@pytest.fixture
def answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state" / "versions.json"
    monkeypatch.setattr(versions, "ANSWERS", path)
    monkeypatch.setattr(versions, "_known", None)
    return path


def program(
    tmp_path: Path, name: str, text: str, code: int = 0, age_s: float = 60
) -> tuple[Path, Path]:
    """A program that says ``text``, exits ``code``, counts its runs in a file and was
    last changed ``age_s`` ago."""
    runs = tmp_path / f"{name}.runs"
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho x >> {runs}\necho '{text}'\necho warn >&2\nexit {code}\n")
    path.chmod(0o755)
    at = time.time() - age_s
    os.utime(path, (at, at))
    return path, runs


def count(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_a_program_is_asked_once_and_a_later_process_reads_its_answer(tmp_path, answers):
    path, runs = program(tmp_path, "tool", "tool 1.2")
    first = versions.ask([str(path), "--version"])
    again = versions.ask([str(path), "--version"])
    assert (first.stdout, first.stderr, first.returncode) == ("tool 1.2\n", "warn\n", 0)
    assert (again.stdout, again.stderr, again.returncode) == ("tool 1.2\n", "warn\n", 0)
    assert count(runs) == 1
    # Another process (a later command, a guest over 9p) starts with the file only.
    versions._known = None
    assert versions.ask([str(path), "--version"]).stdout == "tool 1.2\n"
    assert count(runs) == 1
    assert stat.S_IMODE(answers.stat().st_mode) == 0o644
    # Other arguments are another question.
    versions.ask([str(path), "-v"])
    assert count(runs) == 2


def test_a_replaced_program_is_asked_again(tmp_path, answers):
    path, runs = program(tmp_path, "tool", "tool 1.2")
    versions.ask([str(path), "--version"])
    program(tmp_path, "tool", "tool 1.10", age_s=30)  # an upgrade: another size
    assert versions.ask([str(path), "--version"]).stdout == "tool 1.10\n"
    stamp = path.stat()
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))  # same size, later
    versions.ask([str(path), "--version"])
    assert count(runs) == 3


def test_a_program_changed_just_now_is_asked_until_it_has_settled(tmp_path, answers):
    """Rewritten within the clock's granularity, a file keeps its size and time: an
    answer is kept only about a file unchanged for SETTLED_NS."""
    path, runs = program(tmp_path, "tool", "tool 1.2", age_s=0)
    versions.ask([str(path), "--version"])
    program(tmp_path, "tool", "tool 1.3", age_s=0)  # same size, maybe the same time
    assert versions.ask([str(path), "--version"]).stdout == "tool 1.3\n"
    assert count(runs) == 2 and not answers.exists()


def test_a_failure_is_kept_and_raised_each_time_when_checked(tmp_path, answers):
    path, runs = program(tmp_path, "bad", "no version", code=3)
    for _ in range(2):
        with pytest.raises(CommandError, match=r"exit 3\): warn"):
            versions.ask([str(path), "--version"])
        assert versions.ask([str(path), "--version"], check=False).returncode == 3
    assert count(runs) == 1


def test_what_a_program_reads_can_be_the_file_asked_after(tmp_path, answers):
    database = tmp_path / "status"
    database.write_text("a")
    os.utime(database, (time.time() - 60, time.time() - 60))
    path, runs = program(tmp_path, "query", "1.0")
    argv = [str(path), "pkg"]
    versions.ask(argv, file=str(database))
    versions.ask(argv, file=str(database))
    database.write_text("ab")  # a package installed
    os.utime(database, (time.time() - 30, time.time() - 30))
    versions.ask(argv, file=str(database))
    assert count(runs) == 2


def test_a_program_named_is_the_one_path_finds_now(tmp_path, answers, monkeypatch):
    """Two programs of one name: each answers for itself (a test's stand-in, a program
    installed in a directory earlier on PATH)."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    program(first, "query", "installed 1.0")
    program(second, "query", "not-installed")
    monkeypatch.setenv("PATH", str(first))
    assert versions.ask(["query"]).stdout == "installed 1.0\n"
    monkeypatch.setenv("PATH", str(second))
    assert versions.ask(["query"]).stdout == "not-installed\n"


def test_answers_of_removed_files_are_dropped_and_an_unwritable_place_keeps_them_in_memory(
    tmp_path, answers, monkeypatch
):
    gone, _ = program(tmp_path, "gone", "gone 1")
    kept, _ = program(tmp_path, "kept", "kept 1")
    versions.ask([str(gone), "--version"])
    gone.unlink()
    versions.ask([str(kept), "--version"])
    assert [json.loads(k)[0] for k in json.loads(answers.read_text())] == [str(kept)]
    # Nowhere to write (a guest's read-only view, another user): asked, kept in memory,
    # and no temporary file left.
    blocked = tmp_path / "blocked"
    blocked.write_text("")
    monkeypatch.setattr(versions, "ANSWERS", blocked / "versions.json")
    monkeypatch.setattr(versions, "_known", None)
    other, other_runs = program(tmp_path, "other", "other 1")
    versions.ask([str(other), "--version"])
    versions.ask([str(other), "--version"])
    assert count(other_runs) == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".versions-")) == []


def test_a_missing_program_is_not_kept(tmp_path, answers):
    with pytest.raises(UserError, match="not found"):
        versions.ask([str(tmp_path / "absent"), "--version"])
    assert not answers.exists()
