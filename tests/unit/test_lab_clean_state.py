"""``lab clean`` acts only on state no other user could have written, and ends a VM
guest that a killed run left booting. The real command in a fresh process, on a state
directory of its own (``TUNNELBENCH_STATE_DIR``), with real processes started here."""

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunnelbench.lab import state as lab_state

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="lab clean needs root")

SRC = Path(__file__).resolve().parents[2] / "src"


def _clean(states: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "TUNNELBENCH_STATE_DIR": str(states)}
    return subprocess.run(
        [sys.executable, "-m", "tunnelbench", "lab", "clean"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _dead_owner() -> dict[str, int]:
    """An owner that has exited: the labs it names are left behind."""
    gone = subprocess.Popen(["true"])
    start = lab_state.process_start_time(gone.pid) or 0
    gone.wait()
    return {"pid": gone.pid, "start_time": start}


def _write(states: Path, state: lab_state.LabState) -> None:
    (states / state.lab_id).mkdir(mode=0o700)
    (states / state.lab_id / "state.json").write_text(json.dumps(dataclasses.asdict(state)))


@pytest.fixture
def states(tmp_path: Path) -> Path:
    path = tmp_path / "labs"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def victim():
    """A process the planted state names, and a file it names."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("how", ["world-writable directory", "another user's state file"])
def test_state_another_user_could_have_written_is_refused(states, victim, tmp_path, how):
    precious = tmp_path / "precious"
    precious.write_text("root's")
    record = lab_state.ProcessRecord(
        victim.pid, lab_state.process_start_time(victim.pid) or 0, ["sleep"]
    )
    _write(states, lab_state.LabState("abc123", processes=[record], files=[str(precious)]))
    if how == "world-writable directory":
        states.chmod(0o777)
        path, why = states, "is writable by its group or by others (mode 777)"
    else:
        path = states / "abc123" / "state.json"
        os.chown(path, 65534, 65534)
        why = "is owned by uid 65534, neither root nor uid 0 (this user)"
    done = _clean(states)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tunnelbench: error: lab state '{path}' {why}: another user")
    assert victim.poll() is None and precious.exists()


def test_a_guest_a_killed_run_left_is_ended_and_its_directory_removed(states, tmp_path):
    # virtme-ng's place: a group leader with children of its own (QEMU is a grandchild).
    group = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True)
    exchange = tmp_path / "guest-0badc0de"
    exchange.mkdir()
    (exchange / "events.jsonl").write_text("{}\n")
    guest = lab_state.GuestRecord(
        str(exchange), group.pid, lab_state.process_start_time(group.pid) or 0
    )
    try:
        time.sleep(0.2)  # its children started
        _write(states, lab_state.LabState("vm0badc0de", owner=_dead_owner(), guests=[guest]))
        assert len(lab_state._group_members(guest)) == 3
        done = _clean(states)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "lab vm0badc0de removed\n"
        assert group.wait(timeout=5) is not None
        assert lab_state._group_members(guest) == []
        assert not exchange.exists() and list(states.iterdir()) == []
    finally:
        if group.poll() is None:
            os.killpg(group.pid, 9)
        group.wait()
