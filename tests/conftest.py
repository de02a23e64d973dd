"""Shared paths for the test suite, the one process setting every test relies on, and a
line saying how fast the machine ran the suite."""

import signal
import time
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

# The tests stop runs with SIGINT, as Ctrl-C does. A suite started in the background of
# a shell without job control (`make test &`) inherits SIGINT ignored, and every child
# would too, so a run would never see it: a handled SIGINT here is reset to the default
# in each child when it starts (seen: every interrupt-and-resume test failed that way).
signal.signal(signal.SIGINT, signal.default_int_handler)

#: Steps of the pure-Python loop that gauges the machine's speed (about 0.1-0.3 s).
SPEED_STEPS = 2_000_000
#: The speed and CPU times at the session's start.
_MACHINE = pytest.StashKey[tuple[float, list[int]]]()


def _loop_speed() -> float:
    """Million steps a second of a fixed pure-Python loop: the suite's own yardstick.
    Its time varies with the machine (a slow or shared vCPU ran it 2-3 times slower on
    some days than on others), so a suite's wall time means little without it."""
    begin = time.perf_counter()
    total = 0
    for step in range(SPEED_STEPS):
        total += step
    return SPEED_STEPS / (time.perf_counter() - begin) / 1e6


def _cpu_times() -> list[int]:
    """The machine's CPU time so far (jiffies: user ... steal), from /proc/stat."""
    return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_MACHINE] = (_loop_speed(), _cpu_times())


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The machine the suite ran on: its speed at start and end and the hypervisor's steal
    over the session, to hold a suite time against another day's (see README, Tests)."""
    if _MACHINE not in config.stash:
        return
    speed, before = config.stash[_MACHINE]
    spent = [b - a for a, b in zip(before, _cpu_times(), strict=True)]
    steal = 100 * spent[7] / max(1, sum(spent))
    terminalreporter.write_line(
        f"machine: a pure-Python loop ran {speed:.1f} M steps/s at the start and"
        f" {_loop_speed():.1f} at the end; the hypervisor stole {steal:.1f}% of the CPU time"
    )
