"""CPU time of single processes (all their threads) from ``/proc/PID/stat``."""

import os
from pathlib import Path

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def parse_cpu_ticks(stat_line: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from a ``/proc/PID/stat`` line."""
    # The command name may contain spaces and ')' itself: split after the last ')'.
    fields = stat_line.rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)


def read_cpu_ticks(pid: int) -> tuple[int, int] | None:
    try:
        return parse_cpu_ticks(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, IndexError, ValueError):
        return None


def percent_of_core(ticks: int, seconds: float) -> float:
    """CPU time as percent of one core over a window (may exceed 100 with threads)."""
    return 100.0 * ticks / TICKS_PER_SECOND / seconds if seconds > 0 else 0.0
