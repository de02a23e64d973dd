"""The one wrapper for external programs: a Ctrl-C never loses a child it started."""

import functools
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tunnelbench.system.command import HeldSignals, run, side_by_side


def test_a_ctrl_c_while_a_child_starts_is_held_then_raised():
    with HeldSignals() as held:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # Python runs its handlers here: this one only notes it
    assert held.caught == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        held.deliver()
    with HeldSignals() as quiet:
        pass
    quiet.deliver()  # nothing held: nothing raised


def test_ctrl_c_during_a_command_is_raised_once_it_has_finished(tmp_path: Path):
    """What the command creates exists when the interrupt reaches teardown."""
    made = tmp_path / "made"
    script = f"kill -INT {os.getpid()}; sleep 0.3; touch {made}"
    with pytest.raises(KeyboardInterrupt):
        run(["sh", "-c", script])
    assert made.exists()


def test_side_by_side_keeps_the_order_and_raises_the_first_failure_after_all_ran():
    finished: list[str] = []

    def slow(name: str, seconds: float, fail: bool = False) -> str:
        time.sleep(seconds)
        finished.append(name)
        if fail:
            raise ValueError(name)
        return name

    both = threading.Barrier(2, timeout=5)  # broken unless the two run at once

    def met(name: str) -> str:
        both.wait()
        return slow(name, 0.1 if name == "a" else 0.0)

    assert side_by_side([lambda: met("a"), lambda: met("b")]) == ["a", "b"]
    assert finished == ["b", "a"]
    finished.clear()
    with pytest.raises(ValueError, match="first"):
        side_by_side([lambda: slow("first", 0.0, True), lambda: slow("late", 0.2)])
    assert finished == ["first", "late"]  # the failure waited for the rest


def test_ctrl_c_during_side_by_side_is_raised_after_every_call_has_finished():
    """The lab's namespaces are added side by side. A Ctrl-C raised while the calls were
    still being handed to their threads (inside a thread's start, which the pool then
    never joins) let the teardown look while an `ip netns add` still ran: its namespace
    outlived the lab in CI. Here the first call interrupts while the rest are handed out;
    every one of them must have run, and finished, before the interrupt is raised."""
    finished: list[int] = []

    def call(n: int) -> int:
        if n == 0:
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        finished.append(n)
        return n

    with pytest.raises(KeyboardInterrupt):
        side_by_side([functools.partial(call, n) for n in range(24)])
    assert sorted(finished) == list(range(24))
