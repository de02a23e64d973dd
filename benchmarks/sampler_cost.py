"""The CPU probe's own cost: its thread's CPU time, and its effect on a measurement.

Side by side in one run: the sampler thread's CPU share at 10 and 50 Hz over 5 s, and a
link-bound baseline trial's goodput with the sampler at 10 Hz vs off.
"""

import statistics
import time

from tunnelbench.kinds import StreamMode
from tunnelbench.lab import netns
from tunnelbench.model.plan import LabSettings, LinkSettings, TrafficSettings
from tunnelbench.probes.sampler import Sampler
from tunnelbench.traffic.base import WindowClosed, closed_already
from tunnelbench.traffic.iperf3 import Iperf3

WINDOW = 5.0


def thread_cost(hz: float) -> tuple[float, int]:
    sampler = Sampler(hz=hz)
    sampler.start()
    now = time.monotonic()
    sampler.watch({}, now, now + WINDOW)
    time.sleep(WINDOW + 0.3)
    result = sampler.result()
    assert result is not None
    return result.sampler_cpu_pct, result.samples


def goodput(with_sampler: bool) -> float:
    lab = netns.build(LabSettings(wan=LinkSettings(rate=10**9)))
    settings = TrafficSettings(duration=3, warmup=1)
    sampler = Sampler()
    try:
        if with_sampler:
            sampler.start()

        def started(processes: dict[str, int], t0: float) -> WindowClosed:
            if not with_sampler:
                return closed_already
            sampler.watch(processes, t0 + 1, t0 + 4)
            return sampler.wait_closed

        return Iperf3().run(lab, settings, StreamMode.SINGLE, started).goodput_bps
    finally:
        try:
            sampler.stop()
        finally:
            lab.teardown()


def main() -> None:
    for hz in (10.0, 50.0):
        pct, samples = thread_cost(hz)
        print(f"sampler at {hz:g} Hz: {pct:.3f}% of one core ({samples} samples in {WINDOW:g} s)")
    on, off = [], []
    for _ in range(3):
        on.append(goodput(True))
        off.append(goodput(False))
    ratio = statistics.median(on) / statistics.median(off)
    print(
        f"1gbit baseline goodput with sampler {statistics.median(on) / 1e6:.1f} Mbit/s, "
        f"without {statistics.median(off) / 1e6:.1f} Mbit/s: ratio {ratio:.4f}"
    )


if __name__ == "__main__":
    main()
