"""`tunnelbench plan show` lists a plan's configurations once each (issue 16: 48 rows for
16 configurations said the same thing three times), with how many runs each gets and
whether this machine runs it; the order line says how rows become trials."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests import cli_process
from tunnelbench.errors import UserError
from tunnelbench.vm import machine

ROOT = Path(__file__).parents[2]


def _show(*args: str, columns: int = 300, env: dict[str, str] | None = None) -> str:
    """``plan show``'s output; ``columns`` wide, by default wide enough for every line."""
    done = cli_process.run(
        ["plan", "show", *args],
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "COLUMNS": str(columns), **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_prose_wraps_to_the_terminal_and_the_table_stays_whole():
    wide, narrow = (
        _show("scenarios/queue-comparison.toml"),
        _show("scenarios/queue-comparison.toml", columns=80),
    )
    table = [line for line in wide.splitlines() if re.match(r"(#|\d+) +(tunnel|none|wire)", line)]
    assert table and all(line in narrow.splitlines() for line in table)
    prose = [line for line in narrow.splitlines() if line not in table]
    assert max(len(line) for line in wide.splitlines()) > 80
    assert all(len(line) <= 80 for line in prose), prose
    # Wrapped, not cut: the same words.
    assert " ".join(narrow.split()) == " ".join(wide.split())


def test_one_row_per_configuration_with_its_runs_and_whether_it_runs_here():
    text = _show("scenarios/queue-comparison.toml")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#   tunnel"))
    rows = lines[start + 1 : lines.index("", start)]
    assert len(rows) == 16
    assert [r.split()[0] for r in rows] == [str(n) for n in range(1, 17)]
    assert all(r.split()[-2] == "5" for r in rows)  # repetitions
    # The same configurations, in the same order, as the trials of the first round.
    doc = json.loads(_show("scenarios/queue-comparison.toml", "--json"))
    first = [t for t in doc["trials"] if t["repetition"] == 1]
    assert [r.split()[1] for r in rows] == [t["settings"]["tunnel.kind"] for t in first]
    assert [r.split()[-1] for r in rows] == ["skip" if t["skipped"] else "run" for t in first]
    assert "order: in rounds: each round runs every configuration once, #1 to #16" in text


def test_an_adaptive_plan_shows_the_range_of_runs(tmp_path):
    plan = tmp_path / "adaptive.toml"
    plan.write_text(
        "repetitions = { target = '2%', min = 3, max = 8 }\n"
        "[matrix]\n'tunnel.kind' = ['none', 'vxlan']\n"
    )
    text = _show(str(plan))
    assert "  3-8   " in text


def test_a_vm_plan_shows_the_skips_its_guest_would_make(tmp_path):
    """A guest's cores are its vCPUs and its programs this machine's: `plan show` finds
    those skips, as the guest would at run time (issue 27: a VM plan was not checked)."""
    try:
        machine.vng()
    except UserError as exc:  # without virtme-ng every VM row is skipped for that
        pytest.skip(str(exc))
    plan = tmp_path / "guest.toml"
    plan.write_text(
        '[base.lab]\nkernel = "debian"\n[base.lab.vm]\ncpus = 1\n'
        '[matrix]\n"lab.cpus.gw" = ["0", "1"]\n'
    )
    text = _show(str(plan))
    rows = [line.split() for line in text.splitlines() if line[:1].isdigit()]
    assert [(r[2], r[-1]) for r in rows] == [("0", "vm"), ("1", "skip")]
    assert "skipped on this machine or in its VM guests: 5 trial(s)" in text
    assert "  lab.cpus.gw: core 1 is not online here (cores 0) (5 trials)" in text


def test_the_settings_every_configuration_shares_are_shown(tmp_path: Path):
    """A one-configuration plan showed a one-row table and hid what it set: its rate,
    queue and budget. Settings the table has as columns are not repeated."""
    plan = tmp_path / "p.toml"
    plan.write_text(
        'name = "one"\n[base]\n"lab.wan.rate" = "100mbit"\n"lab.wan.queue_limit" = 5\n'
        '"traffic.streams" = 4\n'
    )
    text = _show(str(plan))
    (line,) = [x for x in text.splitlines() if x.startswith("every configuration: ")]
    assert "lab.wan.rate 100mbit" in line and "lab.wan.queue_limit 5" in line
    assert "traffic.streams 4" in line
    assert "traffic.duration" not in line  # at its default: not said
    two = tmp_path / "two.toml"
    two.write_text(
        'name = "two"\n[base]\n"lab.wan.rate" = "100mbit"\n[matrix]\n"traffic.streams" = [1, 4]\n'
    )
    (line,) = [x for x in _show(str(two)).splitlines() if x.startswith("every configuration")]
    assert "traffic.streams" not in line  # a column of the table


def _kernel_plan(tmp_path: Path, *kernels: str) -> Path:
    plan = tmp_path / "kernels.toml"
    plan.write_text(f'[matrix]\n"lab.kernel" = {json.dumps(list(kernels))}\n')
    return plan


def test_a_kernel_directory_run_would_refuse_is_skipped_with_runs_reason(tmp_path):
    """`plan show` once showed `vm` for a lab.kernel `run` refuses (issue 42)."""
    empty = tmp_path / "not-a-kernel"
    empty.mkdir()
    good = tmp_path / "kernel"
    (good / "lib" / "modules" / "6.1.0-9-amd64").mkdir(parents=True)
    (good / "lib" / "modules" / "6.1.0-9-amd64" / "modules.dep").write_text("")
    (good / "boot").mkdir()
    (good / "boot" / "vmlinuz-6.1.0-9-amd64").write_bytes(b"\0")
    text = _show(str(_kernel_plan(tmp_path, str(empty), str(good))))
    rows = [line.split() for line in text.splitlines() if line[:1].isdigit()]
    assert [(r[2], r[-1]) for r in rows] == [(str(empty), "skip"), (str(good), "vm")]
    reason = f"lab.kernel: {str(empty)!r} holds 0 kernel releases in {empty}/lib/modules (none)"
    assert f"  {reason}; exactly one is needed (5 trials)" in text
    assert "nothing runs here" not in text
    alone = _show(str(_kernel_plan(tmp_path, str(empty))))
    assert "nothing runs here: `run` refuses this plan on this machine" in alone


def test_a_package_apt_does_not_know_is_skipped_and_one_not_fetched_is_said(tmp_path):
    if shutil.which("apt-cache") is None:
        pytest.skip("no apt-cache here: every package is refused, as by run")
    cache = {"TUNNELBENCH_KERNEL_CACHE": str(tmp_path / "cache")}  # nothing fetched yet
    plan = _kernel_plan(tmp_path, "linux-image-0.0.0-nosuch", "debian")
    doc = json.loads(_show(str(plan), "--json", env=cache))
    skipped = {t["settings"]["lab.kernel"]: t["skipped"] for t in doc["trials"]}
    assert skipped["linux-image-0.0.0-nosuch"].startswith(
        "lab.kernel: no package 'linux-image-0.0.0-nosuch' in the configured apt sources"
    )
    if skipped["debian"] is not None:
        pytest.skip(f"apt has no stock Debian kernel here: {skipped['debian']}")
    (note,) = doc["unchecked"]
    assert note.startswith("lab.kernel 'debian': linux-image-")
    assert note.endswith(
        " is in apt's sources but not downloaded yet; whether it downloads is known when"
        " `run` fetches it"
    )
