"""Ctrl-C and SIGTERM are noted by the handler and answered at safe points: never lost in
a finalizer the garbage collector runs, and a wait ends at once. Real signals sent to a
real child process."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

#: A loop that spends nearly all its time in finalizers run by the garbage collector,
#: where a signal handler that raises is "Exception ignored" and the signal is lost.
IN_FINALIZERS = """
import gc, sys, time
from tunnelbench.system import interrupts

class Slow:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it
    def __del__(self):
        t = time.monotonic()
        while time.monotonic() - t < 0.05:
            pass

def loop(pause):
    print("ready", flush=True)
    while True:
        for _ in range(20):
            Slow()
        gc.collect()
        pause(0.0001)

try:
    if sys.argv[1] == "noted":
        with interrupts.installed():
            loop(interrupts.sleep)
    else:  # the handler tunnelbench had: raise wherever the main thread is
        def raise_it(signum, frame):
            raise KeyboardInterrupt
        signal = __import__("signal")
        signal.signal(signal.SIGTERM, raise_it)
        loop(time.sleep)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""

SLEEPING = """
import sys, time
from tunnelbench.system import interrupts
with interrupts.installed():
    print("ready", flush=True)
    t = time.monotonic()
    try:
        interrupts.sleep(60)
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - t:.1f}", flush=True)
        sys.exit(130)
"""


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.3)  # well inside the loop
    return proc


def _stop(proc: subprocess.Popen[str]) -> str:
    """End the child if it still runs; its standard error."""
    if proc.poll() is None:
        proc.kill()
    return proc.communicate()[1] or ""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_in_a_finalizer_is_not_lost(signum):
    proc = _start(IN_FINALIZERS, "noted")
    try:
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=10)
    finally:
        _stop(proc)
    assert (proc.returncode, out, err) == (130, "interrupted\n", "")


def test_a_handler_that_raises_loses_it_there():
    """The failure the handlers above prevent, shown on the same loop."""
    proc = _start(IN_FINALIZERS, "raising")
    try:
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.5)
        went_on = proc.poll() is None
    finally:
        err = _stop(proc)
    assert went_on
    assert "Exception ignored" in err and "KeyboardInterrupt" in err


def test_a_wait_ends_when_the_signal_comes():
    proc = _start(SLEEPING)
    try:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
    finally:
        _stop(proc)
    assert proc.returncode == 130
    assert float(out.split()[-1]) < 2.0
