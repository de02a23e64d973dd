"""How fast each core ran over the measured window: a fixed piece of work, timed in the
CPU time of the thread that did it.

On a VM a core's speed is the host's to decide, and the guest sees no sign of it: there is
no cpufreq, and steal counts only time the vCPU was not running, not time it ran slower
(another guest on its SMT sibling, the host's turbo budget). On the reference VM the same
loop took 56 ms on one core and 91 ms seconds later, with steal at 0.0%: a CPU-bound
figure moves with that, whatever the lab does. So the sampler times :data:`LOOPS`
iterations of a fixed Python loop on every core about once a second
(:data:`EVERY_SAMPLES`), its thread pinned there, and the trial records per core the
median rate over the window (``cpu<N>.speed``, millions of iterations per CPU-second) and
the slowest (``cpu<N>.speed_min``). CPU time, not wall time: a core busy with the lab
delays the loop's turn but does not count against it. It is not blind to the lab, though:
on a busy core the loop finds its caches taken by the lab's work and runs slower, so a
rate compares trials of one configuration (where the lab's load is the same), not a loaded
core with an idle one. In ``benchmarks/variance`` the cores' rate moved 3-9% from trial to
trial of one configuration (27% on a core pinned under a no-tunnel load), and its
correlation with goodput ranged from -0.70 to +0.57: on that host it did not drive the
figures' spread.

The rate depends on the Python that runs it, so it compares trials of one machine and one
tunnelbench install, not machines. Its cost is recorded as ``speed.cost_ms``: a median
of 3.7 ms (at most 7.7) per 3 s window on 2 cores over 96 CPU-bound trials, about 0.1% of
a core, inside the sampler's own 0.76%.
"""

import os
import statistics
import time
from collections.abc import Sequence

from tunnelbench.probes import cpu

LOOPS = 20_000
#: Sampler ticks between two timings (10 per second at the default rate).
EVERY_SAMPLES = 10

Reading = dict[int, float]  # core -> M iterations per CPU-second


def _spin(loops: int) -> float:
    """The CPU time (s) this thread took for ``loops`` iterations of a fixed loop."""
    start = time.thread_time()
    total = 0
    for i in range(loops):
        total += i * i
    return time.thread_time() - start


def read(cores: Sequence[int], loops: int = LOOPS) -> Reading:
    """Each core's rate now. The calling thread moves to each core in turn and returns
    to the cores it was allowed before; a core it may not run on is left out."""
    allowed = os.sched_getaffinity(0)
    found: Reading = {}
    try:
        for core in cores:
            try:
                os.sched_setaffinity(0, {core})
            except OSError:
                continue
            spent = _spin(loops)
            if spent > 0:
                found[core] = round(loops / spent / 1e6, 3)
    finally:
        os.sched_setaffinity(0, allowed)
    return found


def over_window(readings: Sequence[Reading]) -> dict[int, tuple[float, float]]:
    """Per core, the median and the slowest rate over the readings that have it."""
    return {
        core: (round(statistics.median(values), 3), min(values))
        for core, values in cpu.per_core(readings).items()
    }
