"""Stopping an iperf3 client only where its SIGINT handler is safe (system.stopping),
with real processes: one blocked in a system call, one spinning in user space, and a
real iperf3 client on loopback; the same stop as a real host's shell runs it
(``remote.host.BETWEEN_CALLS``, under dash and busybox's ash, by PID and start time); and
the message when a client left no JSON."""

import json
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunnelbench.errors import LabError
from tunnelbench.lab.host import NetnsHost
from tunnelbench.lab.state import LabState, process_start_time
from tunnelbench.remote.host import BETWEEN_CALLS
from tunnelbench.system import stopping
from tunnelbench.traffic import iperf3

KNOWN = platform.machine() in stopping.SAFE_CALLS
needs_known = pytest.mark.skipif(
    not KNOWN, reason=f"no list of safe system calls for {platform.machine()}"
)
#: The shells a host may run the stop under.
SHELLS = [["sh"], *([["busybox", "sh"]] if shutil.which("busybox") else [])]


def _spinner() -> "subprocess.Popen[bytes]":
    """CPython's loop over `pass`, which makes no system call (every look finds user
    space) and ignores SIGINT (so a signal sent leaves it running)."""
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    return subprocess.Popen([sys.executable, "-c", code])


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


@pytest.mark.parametrize(
    ("text", "machine", "expected"),
    [
        ("running\n", "x86_64", None),
        ("-1 0x7ffd5c 0x7f3a12\n", "x86_64", None),  # frozen in user space
        ("23 0x9 0x7ffd 0x0 0x0 0x7ffd 0x0 0x7ffd5c 0x7f3a12\n", "x86_64", "select"),
        ("1 0x5 0x55d0 0x20000 0x0 0x0 0x0 0x7ffd5c 0x7f3a12\n", "x86_64", "write"),
        ("12 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffd5c 0x7f3a12\n", "x86_64", None),  # brk: malloc's
        ("9 0x0 0x21000 0x3 0x22 0xffffffff 0x0 0x7ffd 0x7f3a\n", "x86_64", None),  # mmap
        ("64 0x5 0xaaaa 0x20000 0x0 0x0 0x0 0xffff 0xffff\n", "aarch64", "write"),
        ("214 0x0 0x0 0x0 0x0 0x0 0x0 0xffff 0xffff\n", "aarch64", None),  # brk
        ("23 0x9 0x0 0x0 0x0 0x0 0x0 0x0 0x0\n", "riscv64", None),  # no list
        ("", "x86_64", None),
    ],
)
def test_only_the_calls_of_a_send_loop_count_as_safe(text, machine, expected):
    assert stopping.safe_call(text, machine) == expected


@needs_known
def test_a_process_blocked_in_a_call_is_interrupted_at_the_first_look():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.1)
        assert stopping.interrupt(sleeper.pid) is True
        assert sleeper.wait(5) == -signal.SIGINT  # ended by the SIGINT, not left frozen
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_known
def test_a_process_that_never_makes_a_call_gets_the_signal_at_the_bound_and_runs_on():
    spinner = _spinner()
    try:
        time.sleep(0.3)
        began = time.monotonic()
        assert stopping.interrupt(spinner.pid) is False
        assert stopping.LOOK_FOR_S <= time.monotonic() - began < stopping.LOOK_FOR_S + 1.0
        time.sleep(0.05)
        state = _state(spinner.pid)
        assert state in ("R", "S"), f"left in state {state}"  # let go, not frozen
        assert spinner.poll() is None  # it ignores SIGINT: the signal was sent and ignored
    finally:
        spinner.kill()
        spinner.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@needs_known
def test_an_iperf3_client_stopped_this_way_writes_its_json(tmp_path):
    port = _free_port()
    server = subprocess.Popen(
        ["iperf3", "-s", "-1", "-J", "-p", str(port)], stdout=subprocess.DEVNULL
    )
    out = tmp_path / "client.json"
    try:
        time.sleep(0.3)
        with out.open("wb") as sink:
            client = subprocess.Popen(
                ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-J", "-i", "0.1",
                 "-t", "10", "-P", "8", "-b", "50M"],
                stdout=sink,
            )  # fmt: skip
        time.sleep(1.0)
        assert stopping.interrupt(client.pid) is True
        client.wait(10)
        doc = json.loads(out.read_text())
        assert doc["error"] == iperf3.INTERRUPTED[0]
        assert len(doc["intervals"]) >= 3  # what it measured before the stop is kept
    finally:
        for proc in (server,):
            proc.kill()
            proc.wait()


def test_a_client_that_left_no_json_is_named_with_how_it_ended(tmp_path):
    out, err = tmp_path / "iperf3-client-5204.json", tmp_path / "iperf3-client-5204.err"
    with out.open("wb") as sink, err.open("wb") as errors:
        crashed = subprocess.Popen(
            ["sh", "-c", "echo 'Fatal glibc error: malloc assertion failure' >&2; kill -ABRT $$"],
            stdout=sink,
            stderr=errors,
        )
    crashed.wait(5)
    with pytest.raises(LabError) as caught:
        # The files are this machine's: a namespace host reads them (its namespace unused).
        iperf3._load(NetnsHost("unused", LabState("unused")), out, crashed)
    assert str(caught.value) == (
        "iperf3 wrote no JSON to iperf3-client-5204.json: empty output; it exited on"
        " SIGABRT, saying: Fatal glibc error: malloc assertion failure"
    )


def _stop_on_host(shell: list[str], pid: int, start: int | None = None) -> str:
    """``BETWEEN_CALLS`` run as a host runs it; what it said on its error output."""
    lists = [f"{m}:{' '.join(map(str, calls))}" for m, calls in stopping.SAFE_CALLS.items()]
    began = str(start if start is not None else process_start_time(pid))
    argv = [*shell, "-c", BETWEEN_CALLS, "interrupt", str(pid), began, *lists]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stderr


@needs_known
@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_hosts_stop_signals_a_blocked_process_at_the_first_look_and_lets_it_go(shell):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.1)
        assert _stop_on_host(shell, sleeper.pid) == ""  # a safe point was found
        assert sleeper.wait(5) == -signal.SIGINT  # ended by the SIGINT, not left frozen
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_known
@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_hosts_stop_signals_a_process_never_in_a_call_after_its_looks(shell):
    spinner = _spinner()
    try:
        time.sleep(0.3)
        assert _stop_on_host(shell, spinner.pid).startswith("no safe point after 100 looks")
        time.sleep(0.2)
        assert spinner.poll() is None  # let go: not left stopped, not ended
        assert _state(spinner.pid) in ("R", "S")
    finally:
        spinner.kill()
        spinner.wait()


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_hosts_stop_leaves_another_process_under_the_same_pid_alone(shell):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.1)
        start = process_start_time(sleeper.pid)
        assert start is not None
        assert _stop_on_host(shell, sleeper.pid, start + 1) == ""
        time.sleep(0.2)
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
