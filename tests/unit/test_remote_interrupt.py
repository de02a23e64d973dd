"""The stop between calls as a real host runs it (``remote.host.BETWEEN_CALLS``): the
script itself, under the shells a host may have (dash, busybox's ash), on real processes
of this machine, by PID and start time as a remote run records them."""

import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunnelbench.lab.state import process_start_time
from tunnelbench.remote.host import BETWEEN_CALLS
from tunnelbench.system import stopping

SHELLS = [["sh"], *([["busybox", "sh"]] if shutil.which("busybox") else [])]
KNOWN = platform.machine() in stopping.SAFE_CALLS
needs_known = pytest.mark.skipif(
    not KNOWN, reason=f"no list of safe system calls for {platform.machine()}"
)


def _stop(shell: list[str], pid: int, start: int | None = None) -> subprocess.CompletedProcess:
    lists = [f"{m}:{' '.join(map(str, calls))}" for m, calls in stopping.SAFE_CALLS.items()]
    began = str(start if start is not None else process_start_time(pid))
    argv = [*shell, "-c", BETWEEN_CALLS, "interrupt", str(pid), began, *lists]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)


@needs_known
@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_blocked_process_gets_sigint_at_the_first_look_and_is_let_go(shell):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.1)
        done = _stop(shell, sleeper.pid)
        assert done.stderr == ""  # a safe point was found
        assert sleeper.wait(5) == -signal.SIGINT  # ended by the SIGINT, not left frozen
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_known
@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_process_never_in_a_call_gets_sigint_after_the_looks_and_runs_on(shell):
    spinner = subprocess.Popen(
        [sys.executable, "-c", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
         "while True: pass"]
    )  # fmt: skip
    try:
        time.sleep(0.3)
        done = _stop(shell, spinner.pid)
        assert done.stderr.strip().startswith("no safe point after 100 looks")
        time.sleep(0.2)
        assert spinner.poll() is None  # let go: not left stopped, not ended
        stat = Path(f"/proc/{spinner.pid}/stat").read_text()
        state = stat.rpartition(")")[2].split()[0]
        assert state in ("R", "S")
    finally:
        spinner.kill()
        spinner.wait()


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_another_process_under_the_same_pid_is_left_alone(shell):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.1)
        start = process_start_time(sleeper.pid)
        assert start is not None
        assert _stop(shell, sleeper.pid, start + 1).stderr == ""
        time.sleep(0.2)
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
