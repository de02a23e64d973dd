"""Inputs that once hung, exhausted memory or crashed, each refused in one line: a FIFO
or an oversized plan file, a plan of ~6e11 combinations, and output to a full disk
(the only case of exit 1: a fault of the machine, not of the request).

The golden cases of the same family are in tests/fixtures/golden/cli-errors.json and
tests/fixtures/plans/invalid.json; these need a file made at test time or a check
beyond the message (memory, exit code 1).
"""

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tunnelbench.bench.planfile as planfile
from tests.conftest import FIXTURES
from tunnelbench.echo import ECHO_MAX, capped, integer, shown
from tunnelbench.errors import UserError

#: What `plan show` may use at most, virtual memory included (the interpreter and its
#: imports take ~150 MiB of address space). The plan below, expanded, needs terabytes.
MEMORY_LIMIT = 1024**3


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A copy of a recorded run: opening the store may migrate it."""
    path = tmp_path_factory.mktemp("recorded") / "queue-comparison.db"
    shutil.copy(FIXTURES / "runs" / "queue-comparison.db", path)
    return path


def tunnelbench(args: list[str], cwd: Path, memory: int | None = None, **kwargs):
    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, "-m", "tunnelbench", *args],
        cwd=cwd, capture_output=True, text=True, timeout=60, preexec_fn=limit, **kwargs,
    )  # fmt: skip


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "plan.toml"
    os.mkfifo(fifo)
    with pytest.raises(UserError) as caught:
        planfile.load(fifo)
    assert str(caught.value) == f"plan: {str(fifo)!r} is a FIFO, not a plan file (TOML)"


def test_a_plan_file_over_one_mib_is_refused_unread(tmp_path):
    plan = tmp_path / "big.toml"
    plan.write_text("# comment\n" * (planfile.PLAN_BYTES_MAX // 10 + 1))
    with pytest.raises(UserError) as caught:
        planfile.load(plan)
    assert str(caught.value) == (
        f"plan: {str(plan)!r} is larger than 1024 KiB; a plan is a short TOML file"
    )
    plan.write_text("# comment\n" * (planfile.PLAN_BYTES_MAX // 10))  # just under: fine
    assert planfile.load(plan).experiment.configs


def test_a_byte_order_mark_is_accepted(tmp_path):
    plan = tmp_path / "bom.toml"
    plan.write_bytes('\ufeffname = "with a BOM"\n'.encode())
    assert planfile.load(plan).name == "with a BOM"


def test_a_plan_of_6e11_combinations_is_refused_in_bounded_time_and_memory(tmp_path):
    axes = {
        "traffic.streams": range(1, 129),
        "traffic.duration": range(1, 3601),
        "traffic.warmup": range(0, 61),
        "lab.wan.queue_limit": range(1, 21),
    }
    text = "[matrix]\n" + "".join(f"{p} = {list(values)}\n" for p, values in axes.items())
    (tmp_path / "huge.toml").write_text(text)
    start = time.monotonic()
    done = tunnelbench(["plan", "show", "huge.toml"], tmp_path, memory=MEMORY_LIMIT)
    assert time.monotonic() - start < 20
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "tunnelbench: error: huge.toml: 1 problem:\n"
        "  matrix: 128 x 3,600 x 61 x 20 = 562,176,000 combinations;"
        " a plan may have at most 10,000 trials\n"
    )


def test_many_problems_are_counted_not_all_listed():
    text = "[matrix]\ntraffic.streams = [" + ", ".join(["0"] * 500) + "]\n"
    text += "".join(f"bogus{i} = 1\n" for i in range(50))
    with pytest.raises(planfile.PlanError) as caught:
        planfile.parse(text, "p.toml")
    lines = str(caught.value).splitlines()
    assert lines[0] == "p.toml: 550 problems:"  # 500 values out of range, 50 unknown keys
    assert len(lines) == 1 + planfile.PROBLEMS_SHOWN + 1
    assert lines[-1] == f"  ... and {550 - planfile.PROBLEMS_SHOWN} more"


def test_report_to_a_full_disk_is_a_fault_of_the_machine(tmp_path, recorded):
    for fmt in ("table", "html", "json", "csv"):
        done = tunnelbench(
            ["report", "--db", str(recorded), "--format", fmt, "-o", "/dev/full"], tmp_path
        )
        assert done.returncode == 1, done.stderr
        assert (
            done.stderr
            == "tunnelbench: error: -o: cannot write '/dev/full': No space left on device\n"
        )
        assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_standard_output_on_a_full_disk_is_a_fault_of_the_machine(tmp_path, recorded):
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "tunnelbench", "report", "--db", str(recorded)],
            cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == "tunnelbench: error: standard output: No space left on device\n"


def test_echoed_values_are_capped():
    assert shown("x" * 10_000) == "'" + "x" * 27 + "..." + "x" * 28 + "'"
    assert shown(10**5000) == "<5,001-digit number>"  # str() refuses beyond 4,300 digits
    assert shown(-(2**200)) == "<-61-digit number>"
    assert integer(2**63) == "9223372036854775808"
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    assert shown(nested) == "[[[[...]]]]"
    assert len(shown({str(i): i for i in range(1000)})) <= ECHO_MAX
    assert capped("abc", 3) == "abc" and capped("abcd", 3) == "..."


def test_more_than_1000_exclude_rules_are_refused():
    text = "[matrix]\ntraffic.streams = [1, 2]\n" + "[[exclude]]\ntraffic.streams = 1\n" * 1001
    with pytest.raises(planfile.PlanError) as caught:
        planfile.parse(text, "p.toml")
    assert caught.value.problems == ["exclude: 1,001 rules; at most 1,000"]


def test_exclude_rules_are_matched_without_scanning_every_combination():
    """1,000 rules over a 100 x 100 matrix: each rule removes its own pair of
    combinations (1,100 in all, as some pairs overlap); a value the matrix lacks is
    named with the values it has, capped."""
    streams, durations = list(range(1, 101)), list(range(1, 101))
    rules = [(1 + i % 100, 1 + i // 100) for i in range(1000)]
    head = f"repetitions = 1\n[matrix]\ntraffic.streams = {streams}\n"
    head += f"traffic.duration = {durations}\n"
    texts = [
        f"[[exclude]]\ntraffic.streams = {s}\ntraffic.duration = [{d}, {d + 1}]\n" for s, d in rules
    ]
    plan = planfile.parse(head + "".join(texts), "p.toml")
    assert plan.excluded == 1100
    removed = {(s, d) for s, d0 in rules for d in (d0, d0 + 1)}
    kept = {(c.traffic.streams, c.traffic.duration) for c in plan.experiment.configs}
    assert len(kept) == 10_000 - 1100 and not kept & removed
    texts[-1] = "[[exclude]]\ntraffic.streams = [1]\ntraffic.duration = 101\n"
    with pytest.raises(planfile.PlanError) as caught:
        planfile.parse(head + "".join(texts), "p.toml")
    assert caught.value.problems == [
        "exclude[999].traffic.duration: 101 is not a value of the matrix (1, 2, 3, 4, 5, 6,"
        " 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,"
        " 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,"
        " 49, 50, 51, 52...)"
    ]


def test_report_to_a_fifo_that_nothing_reads_is_refused_not_waited_for(tmp_path, recorded):
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    done = tunnelbench(["report", "--db", str(recorded), "-o", str(fifo)], tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"tunnelbench: error: -o: {str(fifo)!r} is a FIFO that nothing reads\n"


def test_a_run_id_beyond_sqlite_integers_is_no_run(tmp_path, recorded):
    done = tunnelbench(["report", "99999999999999999999999", "--db", str(recorded)], tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"tunnelbench: error: run: no run 99999999999999999999999 in {str(recorded)!r}\n"
    )
