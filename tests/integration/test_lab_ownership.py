"""Fault injection for the labs' owners and processes (issue 12, C.7 and C.8).

- `lab clean` while a run measures leaves that run's lab alone, says so, and `--force`
  removes it; `lab down` of a live lab needs `--force` too.
- A run killed with SIGKILL leaves daemons behind; if it died between spawning a daemon
  and recording its PID, no record names it. The state file is rewritten here without
  the process records: exactly what a SIGKILL in that window leaves on disk (a live
  daemon in the lab's namespace, its PID unwritten). `lab clean` must still end it, by
  finding it inside the lab's namespace, report it, and leave nothing behind.

Runs use `--allow-concurrent`: these tests measure nothing, and must not wait for (or
be refused by) another measurement on the machine.
"""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench import capabilities, skips
from tunnelbench.bench.store import Store
from tunnelbench.errors import LabError
from tunnelbench.kinds import TunnelKind
from tunnelbench.lab import netns
from tunnelbench.lab import state as lab_state
from tunnelbench.model.plan import LabSettings, TrialConfig, TunnelSettings


def _start_run(*args: str) -> "subprocess.Popen[str]":
    return subprocess.Popen(
        [sys.executable, "-m", "tunnelbench", "run", "-q", "--allow-concurrent", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _lab_of(proc: "subprocess.Popen[str]", ready, timeout: float = 60) -> lab_state.LabState:
    """The lab the run ``proc`` owns, once ``ready(state)`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.communicate()
        for lab_id in lab_state.known_labs():
            try:
                st = lab_state.LabState.load(lab_id)
            except (OSError, ValueError):
                continue  # being removed
            if st.owner and st.owner["pid"] == proc.pid and ready(st):
                return st
        assert time.monotonic() < deadline, "the run never built its lab"
        time.sleep(0.05)


def _namespaces(st: lab_state.LabState) -> set[str]:
    return set(st.namespaces) & set(lab_state.list_namespaces())


def test_lab_clean_leaves_a_live_runs_lab_and_lab_down_refuses_it(tmp_path: Path):
    db = tmp_path / "r.db"
    run = _start_run("--tunnels", "none", "--streams", "1", "--runs", "1",
                     "--duration", "6", "--db", str(db))  # fmt: skip
    try:
        # Once the generator runs, the trial is measuring.
        st = _lab_of(run, lambda s: len(s.processes) >= 2)
        clean = tunnelbench("lab", "clean")
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert f"lab {st.lab_id} left: in use by pid {run.pid} (" in clean.stdout
        assert "`tunnelbench lab clean --force` removes it anyway" in clean.stdout
        assert _namespaces(st) == set(st.namespaces)
        down = tunnelbench("lab", "down", st.lab_id)
        assert down.returncode == 2
        (line,) = down.stderr.splitlines()
        assert line.startswith(f"tunnelbench: error: lab: '{st.lab_id}' is in use by pid {run.pid}")
        assert line.endswith("add --force to remove it anyway")
        status = tunnelbench("lab", "status")
        assert f"in use by pid {run.pid}" in status.stdout
    finally:
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, out + err
    store = Store.read(db)
    assert [t.status for t in store.trials(store.run("latest").id)] == ["ok"]
    store.close()
    again = tunnelbench("lab", "clean")
    assert again.returncode == 0, again.stdout
    assert st.lab_id not in again.stdout
    assert not st.directory.exists()


def test_lab_clean_force_removes_a_live_runs_lab_and_a_second_clean_is_clean(tmp_path: Path):
    db = tmp_path / "r.db"
    run = _start_run("--tunnels", "none", "--streams", "1", "--runs", "1",
                     "--duration", "6", "--db", str(db))  # fmt: skip
    try:
        st = _lab_of(run, lambda s: len(s.processes) >= 2)
        forced = tunnelbench("lab", "clean", "--force")
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert f"lab {st.lab_id} removed" in forced.stdout
        assert _namespaces(st) == set()
    finally:
        out, err = run.communicate(timeout=120)
    # The run's trial lost its lab: it is stored as failed, and the run says so.
    assert run.returncode == 1, out + err
    store = Store.read(db)
    assert [t.status for t in store.trials(store.run("latest").id)] == ["failed"]
    store.close()
    second = tunnelbench("lab", "clean")
    assert second.returncode == 0, second.stdout + second.stderr
    assert st.lab_id not in second.stdout
    assert not st.directory.exists()


def _runnable(kind: TunnelKind) -> str | None:
    return skips.unmet(TrialConfig(tunnel=TunnelSettings(kind=kind)), capabilities.probe())


@pytest.mark.parametrize("kind", [TunnelKind.OPENVPN, TunnelKind.WIREGUARD])
def test_a_daemon_whose_pid_was_never_recorded_is_ended_by_lab_clean(tmp_path: Path, kind):
    if reason := _runnable(kind):
        pytest.skip(reason)
    plan = tmp_path / "plan.toml"
    budget = "" if kind is TunnelKind.OPENVPN else 'cpu_budget = "50%"\n'
    # Seed 1 puts the tunnel's trial before its baseline's: the 30 s baseline trial
    # would otherwise run first and the test wait for it.
    plan.write_text(
        f'name = "orphan"\nrepetitions = 1\norder = "shuffled"\nseed = 1\n'
        f'[base.tunnel]\nkind = "{kind.value}"\n{budget}'
        "[base.traffic]\nstreams = 1\nduration = 30\nwarmup = 1\n"
    )
    run = _start_run(str(plan), "--db", str(tmp_path / "r.db"))
    try:
        # Both daemons and the generator are up, and (with a budget) their cgroups made.
        st = _lab_of(run, lambda s: len(s.processes) >= 4 and (not budget or len(s.cgroups) == 2))
    finally:
        run.send_signal(signal.SIGKILL)
        # Not communicate(): what the killed run left running holds its pipes open until
        # it ends (the 30 s generator), and `lab clean` below is what ends it.
        run.wait(timeout=30)
        for stream in (run.stdout, run.stderr):
            if stream is not None:
                stream.close()
    left = [p for p in st.processes if lab_state.is_alive(p)]
    program = "openvpn" if kind is TunnelKind.OPENVPN else "wireguard-go"
    daemons = [p for p in left if any(Path(word).name == program for word in p.argv)]
    assert len(daemons) == 2, f"the killed run left no {program} to end"
    # What a SIGKILL between spawn and record leaves: live processes no record names.
    data = json.loads(st.path.read_text())
    data["processes"] = []
    st.path.write_text(json.dumps(data))

    clean = tunnelbench("lab", "clean")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert f"lab {st.lab_id}: ended unrecorded process(es): " in clean.stdout
    for daemon in daemons:
        assert f"pid {daemon.pid} ({program}) in tb-{st.lab_id}-" in clean.stdout
    # The generator and probes it left (if they had not died with their pipes) too.
    assert not any(lab_state.is_alive(p) for p in left)
    assert f"lab {st.lab_id} removed" in clean.stdout
    assert _namespaces(st) == set()
    assert not any(Path(c).exists() for c in st.cgroups)
    assert not any(Path(f).exists() for f in st.files)
    assert not st.directory.exists()
    second = tunnelbench("lab", "clean")
    assert second.returncode == 0, second.stdout + second.stderr
    assert st.lab_id not in second.stdout


def test_a_lab_removed_under_its_user_is_the_labs_failure_and_a_standing_labs_fault_is_not():
    # The race `lab clean --force` opens: the run reads a generator's output file after
    # the cleaner removed the lab. That must fail the trial (a LabError, stored), not
    # escape as an unexpected FileNotFoundError that leaves the run without its trial.
    lab = netns.build(LabSettings())
    try:
        missing = lab.directory / "iperf3-client.json"
        with pytest.raises(FileNotFoundError), lab.standing():
            missing.read_text()  # the lab stands: a fault of the code, passed on as it is
        lab_state.teardown(lab_state.LabState.load(lab.lab_id))  # what `clean --force` does
        with pytest.raises(LabError) as failure, lab.standing():
            missing.read_text()
        assert str(failure.value).startswith(f"lab {lab.lab_id} was removed while in use (")
        assert lab.ns("client") in str(failure.value)
    finally:
        lab.teardown()
    assert not [n for n in lab_state.list_namespaces() if n.startswith(f"tb-{lab.lab_id}-")]
