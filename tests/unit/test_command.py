"""The one wrapper for external programs: a Ctrl-C never loses a child it started."""

import os
import signal
import time
from pathlib import Path

import pytest

from tunnelbench.system.command import HeldSignals, run


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
