"""A background thread that samples CPU during a trial's measured window.

It sleeps until the warm-up ends, then reads ``/proc/stat`` and the watched processes'
``/proc/PID/stat`` at a fixed rate until the window closes. It measures its own CPU time,
so its cost on the result is known rather than assumed.
"""

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from tunnelbench.probes import cpu, process

DEFAULT_HZ = 10.0


@dataclass
class ProbeResult:
    window_s: float
    cores: list[cpu.CoreUsage]
    processes: dict[str, float]  # label -> percent of one core over the window
    samples: int
    sampler_cpu_pct: float  # the sampler thread's own CPU, percent of one core
    series: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cores"] = [asdict(c) for c in self.cores]
        return data


class Sampler:
    """Start with :meth:`start`, hand it the processes with :meth:`watch`, then :meth:`result`."""

    def __init__(self, hz: float = DEFAULT_HZ) -> None:
        self.period = 1.0 / hz
        self._watched: dict[str, int] = {}
        self._window: tuple[float, float] | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tb-sampler", daemon=True)
        self._snapshots: list[tuple[float, cpu.Snapshot, dict[str, tuple[int, int] | None]]] = []
        self._own_cpu = 0.0

    def start(self) -> None:
        self._thread.start()

    def watch(self, processes: dict[str, int], window_start: float, window_end: float) -> None:
        """Processes to account (label -> PID) and the measured window (monotonic times)."""
        self._watched.update(processes)
        self._window = (window_start, window_end)
        self._ready.set()

    def add(self, processes: dict[str, int]) -> None:
        """Processes known before traffic starts (tunnel daemons)."""
        self._watched.update(processes)

    def stop(self) -> None:
        self._stop.set()
        self._ready.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        self._ready.wait()
        if self._window is None:
            return
        begin, end = self._window
        if self._stop.wait(max(0.0, begin - time.monotonic())):
            return
        started_cpu = time.thread_time()
        next_tick = time.monotonic()
        while True:
            now = time.monotonic()
            self._snapshots.append(
                (
                    now,
                    cpu.read_snapshot(),
                    {label: process.read_cpu_ticks(pid) for label, pid in self._watched.items()},
                )
            )
            if now >= end or self._stop.is_set():
                break
            next_tick = min(next_tick + self.period, end)
            if self._stop.wait(max(0.0, next_tick - time.monotonic())):
                break
        self._own_cpu = time.thread_time() - started_cpu

    def result(self) -> ProbeResult | None:
        """What was seen; None when the window never opened or held fewer than 2 samples."""
        self.stop()
        if len(self._snapshots) < 2:
            return None
        (t0, first, procs0), (t1, last, procs1) = self._snapshots[0], self._snapshots[-1]
        window = t1 - t0
        processes = {}
        for label in procs1:
            before, after = procs0.get(label), procs1[label]
            if before is not None and after is not None:
                ticks = sum(after) - sum(before)
                processes[label] = round(process.percent_of_core(ticks, window), 2)
        series = []
        for (_, a, _), (tb, b, _) in zip(self._snapshots, self._snapshots[1:], strict=False):
            series.append(
                {
                    "t": round(tb - t0, 3),
                    "busy": [round(c.busy, 1) for c in cpu.usage(a, b)],
                }
            )
        return ProbeResult(
            window_s=round(window, 3),
            cores=cpu.usage(first, last),
            processes=processes,
            samples=len(self._snapshots),
            sampler_cpu_pct=round(100.0 * self._own_cpu / window, 3) if window > 0 else 0.0,
            series=series,
        )
