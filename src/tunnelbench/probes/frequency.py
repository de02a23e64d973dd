"""The cores' clock over the measured window, where the kernel has cpufreq.

A core whose clock drops (a power-saving governor, thermal throttling: the RB5009 report's
WireGuard was slow until the clock was pinned) does less work per second, and a CPU-bound
figure drops with it, run by run. Each core's ``cpufreq/scaling_cur_freq`` (kHz) is read
with every CPU sample; a trial records per core the mean (``cpu<N>.mhz``) and the lowest
reading (``cpu<N>.mhz_min``) over the window. Without cpufreq (most VMs, the reference VM
included) there is no file and nothing is recorded: an absent figure, never a zero.
"""

from collections.abc import Sequence
from pathlib import Path

from tunnelbench.probes import cpu

ROOT = Path("/sys/devices/system/cpu")

Reading = dict[int, float]  # core -> MHz


class Clocks:
    """The cpufreq files of this machine's cores, found once (a sample reads only
    those)."""

    def __init__(self, root: Path = ROOT) -> None:
        self.files: dict[int, Path] = {}
        for path in sorted(root.glob("cpu[0-9]*/cpufreq/scaling_cur_freq")):
            core = path.parent.parent.name[3:]
            if core.isdigit():
                self.files[int(core)] = path

    def read(self) -> Reading:
        """Each core's clock now, in MHz; a core whose file cannot be read is left out."""
        found = {}
        for core, path in self.files.items():
            try:
                found[core] = int(path.read_text()) / 1000.0
            except (OSError, ValueError):
                continue
        return found


def over_window(readings: Sequence[Reading]) -> dict[int, tuple[float, float]]:
    """Per core, the mean and the lowest clock (MHz) over the readings that have it."""
    return {
        core: (round(sum(values) / len(values), 1), min(values))
        for core, values in cpu.per_core(readings).items()
    }
