"""This machine's record of a remote session's SSH masters, and ``lab clean --hosts``
ending exactly the recorded ones, tried on real processes (stand-ins whose command
lines name a control socket as an OpenSSH master's does)."""

import os
import subprocess
from pathlib import Path

import pytest

from tunnelbench.errors import UserError
from tunnelbench.lab.state import process_start_time
from tunnelbench.remote import masters


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUNNELBENCH_REMOTE_STATE_DIR", str(tmp_path / "remote"))
    return tmp_path / "remote"


def _master_like(socket: Path) -> "subprocess.Popen[bytes]":
    """A process whose command line is an ssh master's for ``socket`` (its words, not ssh)."""
    argv = ["sh", "-c", "sleep 60", "-o", "ControlMaster=yes", "-o", f"ControlPath={socket}"]
    return subprocess.Popen(argv, start_new_session=True)


def _dead_owner() -> dict[str, object]:
    """The owner record of a run that has ended (a process of this boot that exited)."""
    gone = subprocess.Popen(["true"])
    start = process_start_time(gone.pid)
    gone.wait()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return {"boot_id": boot, "pid": gone.pid, "start_time": start}


def test_a_session_records_its_masters_in_a_private_directory(root, tmp_path):
    hosts = tmp_path / "hosts.toml"
    record = masters.SessionRecord.create("0a1b2c3d", hosts)
    assert record.directory == root / "0a1b2c3d"
    assert (record.directory.stat().st_mode & 0o777) == 0o700
    record.add("gw", "root@gw", os.getpid(), record.directory / "gw.sock")
    loaded = masters.SessionRecord.load(record.directory)
    assert loaded.hosts_file == str(hosts.resolve())
    assert loaded.owner["pid"] == os.getpid()
    assert loaded.masters == [
        masters.Master(
            "gw", "root@gw", os.getpid(), process_start_time(os.getpid()) or 0,
            str(record.directory / "gw.sock"),
        )
    ]  # fmt: skip
    record.remove()
    assert not record.directory.exists()


def test_a_state_directory_others_can_write_to_is_refused(root):
    root.mkdir(parents=True)
    root.parent.chmod(0o777)
    try:
        with pytest.raises(UserError, match=r"not a private directory of this user"):
            masters.SessionRecord.create("0a1b2c3d", Path("hosts.toml"))
    finally:
        root.parent.chmod(0o755)


def test_clean_ends_the_recorded_masters_of_a_killed_run_and_nothing_else(root, tmp_path):
    hosts, other_hosts = tmp_path / "hosts.toml", tmp_path / "other.toml"
    killed = masters.SessionRecord.create("11111111", hosts)
    killed.owner = _dead_owner()
    master = _master_like(killed.directory / "gw.sock")
    # its PID now another process: the same start time, a command line without the socket
    impostor = subprocess.Popen(["sleep", "60"], start_new_session=True)
    # another hosts file's killed run, and a run of this file that still runs
    elsewhere = masters.SessionRecord.create("22222222", other_hosts)
    elsewhere.owner = _dead_owner()
    theirs = _master_like(elsewhere.directory / "gw.sock")
    live = masters.SessionRecord.create("33333333", hosts)  # owned by this process
    mine = _master_like(live.directory / "client.sock")
    try:
        killed.add("gw", "root@gw", master.pid, killed.directory / "gw.sock")
        killed.add("server", "pc", impostor.pid, killed.directory / "server.sock")
        elsewhere.add("gw", "root@gw", theirs.pid, elsewhere.directory / "gw.sock")
        live.add("client", "pc", mine.pid, live.directory / "client.sock")
        said = masters.clean(hosts)
        assert said == [
            f"gw: the SSH master of a killed run (pid {master.pid}): ended; its login on"
            " root@gw with it",
            f"this machine: {live.directory}: left alone: its run is still running"
            f" (pid {os.getpid()})",
        ]
        assert master.wait(timeout=10) != 0  # ended by its PID
        assert impostor.poll() is None and theirs.poll() is None and mine.poll() is None
        assert not killed.directory.exists()
        assert elsewhere.directory.exists() and live.directory.exists()
        assert masters.clean(hosts) == [said[1]]  # once ended, not again
    finally:
        for process in (master, impostor, theirs, mine):
            if process.poll() is None:
                process.kill()
                process.wait()
