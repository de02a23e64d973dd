"""A background thread that samples CPU during a trial's measured window.

It sleeps until the warm-up ends, then reads ``/proc/stat`` and the watched processes'
``/proc/PID/stat`` at a fixed rate until the window closes. It measures its own CPU time,
so its cost on the result is known rather than assumed. A window that moves (an "auto"
warm-up drops the window it opened on trial: :mod:`tunnelbench.traffic.warmup`) starts
it over: what it read for the earlier window is dropped.

At the window's two edges only, it also reads the TCP counters of the traffic's
endpoints (:class:`tcp.WindowCounters`), then takes its CPU sample, and only then scans
every process for the CPU used inside and outside the lab (:mod:`load`); the scans' own
CPU time is recorded as ``load.scan_ms``. That order matters in a VM guest under TCG,
where one scan took 0.3 s: taken first, it pushed the window's CPU samples 0.3 s past
both edges, so the closing one fell after traffic a clock stop had ended.

Every sample is stamped when it is read, and the window the CPU figures cover is the
first sample to the last (``sampler.window_s``). How far its edges fell from the
traffic's window is recorded (``sampler.open_lag_ms``, ``sampler.close_lag_ms``): a
thread starved by a busy emulated core wakes late. A generator that stops its clients by
the clock waits for :meth:`Sampler.wait_closed` first, so the closing sample, however
late, is still taken while the traffic runs.

The thread asks for the lowest real-time priority (``SCHED_FIFO`` 1, ``realtime`` in the
trial's probes): at normal priority, in a TCG guest whose two cores carried softirq and
eight iperf3 processes, it got so little CPU that its closing scan ended more than 1.5 s
after the window. The scans take the same CPU time at either priority, only sooner. The
cores' speed timings (40 ms a core in that guest) drop back to normal priority: a busy
loop at real-time priority would hold its core from the lab's own work, ksoftirqd
included, for all of that time at once, and the timing counts CPU time, which the
priority does not change. Where the priority is refused (no ``CAP_SYS_NICE``) the
thread runs at normal priority throughout, and its lags say what that cost.
"""

import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from tunnelbench.probes import cpu, frequency, load, process, scheduling, speed, tcp

DEFAULT_HZ = 10.0
REALTIME_PRIORITY = 1  # the lowest SCHED_FIFO priority: above every normal thread


def _realtime(on: bool = True) -> bool:
    """Move the calling thread (pid 0 is the thread on Linux) to SCHED_FIFO, or back to
    normal scheduling; False when refused."""
    policy, priority = (os.SCHED_FIFO, REALTIME_PRIORITY) if on else (os.SCHED_OTHER, 0)
    try:
        os.sched_setscheduler(0, policy, os.sched_param(priority))
    except OSError:
        return False
    return True


@contextmanager
def _normal_priority(realtime: bool) -> Iterator[None]:
    """Long work inside the window at normal priority, when the thread runs real-time."""
    if realtime:
        _realtime(False)
    try:
        yield
    finally:
        if realtime:
            _realtime()


@dataclass
class ProbeResult:
    window_s: float
    cores: list[cpu.CoreUsage]
    processes: dict[str, float]  # label -> percent of one core over the window
    samples: int
    sampler_cpu_pct: float  # the sampler thread's own CPU, percent of one core
    #: Per step (``t``, seconds into the window), each core's busy share and its parts (%).
    series: list[dict[str, float | list[float]]] = field(default_factory=list)
    # The endpoints' TCP counters at the window's start and end (role -> counter text).
    tcp_start: dict[str, str] = field(default_factory=dict)
    tcp_end: dict[str, str] = field(default_factory=dict)
    cpu_load: load.Load | None = None  # CPU of the lab's processes and of all others
    load_scan_ms: float | None = None  # CPU time of the two process scans
    #: The lab's threads' migrations and switches over the window (probes.scheduling);
    #: None when this kernel has no sched files.
    scheduling: dict[str, int] | None = None
    #: Per core, the mean and lowest clock (MHz) over the window; empty without cpufreq.
    clocks: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: Per core, the median and slowest rate of a fixed loop (probes.speed), and the
    #: CPU time those timings took (ms, inside sampler_cpu_pct too).
    speeds: dict[int, tuple[float, float]] = field(default_factory=dict)
    speed_cost_ms: float | None = None
    #: How far the first sample fell after the window's start, and the last after its
    #: end (ms; negative when the traffic ended before the window did).
    open_lag_ms: float | None = None
    close_lag_ms: float | None = None
    realtime: bool = False  # the thread ran at SCHED_FIFO priority (see the module)

    @property
    def tcp_metrics(self) -> dict[str, float]:
        """``tcp.window.*`` (see :func:`tcp.window_metrics`)."""
        return tcp.window_metrics(self.tcp_start, self.tcp_end)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cores"] = [asdict(c) for c in self.cores]
        # The counters the metrics come from (the files hold hundreds more).
        data["tcp_window"] = {
            "start": tcp.kept_readings(data.pop("tcp_start")),
            "end": tcp.kept_readings(data.pop("tcp_end")),
        }
        return data


class Sampler:
    """Start with :meth:`start`, hand it the processes with :meth:`watch`, then :meth:`result`;
    :meth:`lab` first adds the window's TCP counters and the CPU used inside and outside
    the lab."""

    def __init__(
        self,
        hz: float = DEFAULT_HZ,
        clocks: frequency.Clocks | None = None,
        speed_every: int = speed.EVERY_SAMPLES,
    ) -> None:
        self.period = 1.0 / hz
        self._clocks = clocks or frequency.Clocks()
        self._clock_readings: list[frequency.Reading] = []
        self._speed_every = speed_every  # 0: no speed timings
        self._speed_readings: list[speed.Reading] = []
        self._speed_cpu = 0.0
        self._namespaces: dict[str, int] = {}
        self._counters = tcp.WindowCounters({})
        self._edges: list[tuple[float, float, dict[str, str], load.Scan]] = []
        self._threads: list[scheduling.Threads | None] = []
        self._scan_cpu = 0.0
        self._watched: dict[str, int] = {}
        self._window: tuple[float, float] | None = None
        self._generation = 0  # counts the windows asked for: a moved one drops the last
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tb-sampler", daemon=True)
        self._snapshots: list[tuple[float, cpu.Snapshot, dict[str, tuple[int, int] | None]]] = []
        self._own_cpu = 0.0
        self._realtime = False

    def lab(self, namespaces: Mapping[str, int], tcp_roles: Sequence[str]) -> None:
        """The lab's network namespaces (role -> inode, see :func:`load.namespace_inodes`),
        whose processes are the lab's load, and the roles whose TCP counters are read
        over the window (the traffic's endpoints); before :meth:`start`."""
        self._namespaces = dict(namespaces)
        self._counters = tcp.WindowCounters({r: namespaces[r] for r in tcp_roles})

    def start(self) -> None:
        self._thread.start()

    def watch(self, processes: dict[str, int], window_start: float, window_end: float) -> None:
        """Processes to account (label -> PID) and the measured window (monotonic times).

        Opens the TCP counters of the endpoints' namespaces through these processes
        (before the window: a few ``readlink`` and ``open`` calls). Called again, before,
        during or after the window, it moves the window: what was sampled for the earlier
        one is dropped, and :meth:`wait_closed` waits for the new one."""
        self._watched.update(processes)
        self._counters.open_from(processes.values())
        with self._lock:
            self._window = (window_start, window_end)
            self._generation += 1
            self._closed.clear()
        self._ready.set()

    def add(self, processes: dict[str, int]) -> None:
        """Processes known before traffic starts (tunnel daemons)."""
        self._watched.update(processes)

    def wait_closed(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the window's closing sample and scan; True once
        they are taken (or the sampler ended without a window)."""
        return self._closed.wait(timeout_s)

    def stop(self) -> None:
        self._stop.set()
        self._ready.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._counters.close()

    def _edge_counters(self) -> dict[str, str]:
        """The endpoints' TCP counters, first at each edge: they are closest to it.

        A generator just started may not have entered its namespace yet when
        :meth:`watch` sees it (``ip netns exec`` switches, then runs it): the counters of
        a namespace still missing are opened at the window's start, through the watched
        processes, or else (:meth:`_edge_scan`) any process the scan finds in it."""
        if not self._edges and self._counters.missing:
            self._counters.open_from(self._watched.values())
        return self._counters.read()

    def _edge_scan(self, counters: dict[str, str]) -> None:
        """After the edge's CPU sample: the process scan, stamped when it starts."""
        first = not self._edges
        begin_cpu = time.thread_time()
        at, wall = time.monotonic(), time.time()
        scan = load.scan() if self._namespaces else {}
        if self._namespaces:
            inodes = set(self._namespaces.values())
            self._threads.append(
                scheduling.read(pid for pid, seen in scan.items() if seen.netns in inodes)
            )
        self._scan_cpu += time.thread_time() - begin_cpu
        if first and self._counters.missing:
            self._counters.open_from(scan)
            counters = self._counters.read() | counters
        self._edges.append((at, wall, counters, scan))

    def _sample(self) -> None:
        at = time.monotonic()
        snapshot = cpu.read_snapshot()
        ticks = {label: process.read_cpu_ticks(pid) for label, pid in self._watched.items()}
        self._snapshots.append((at, snapshot, ticks))
        if self._clocks.files:
            self._clock_readings.append(self._clocks.read())

    def _reset(self) -> None:
        """Drop what was sampled for a window that moved (the thread's own lists)."""
        self._snapshots, self._edges, self._threads = [], [], []
        self._clock_readings, self._speed_readings = [], []
        self._speed_cpu = self._scan_cpu = self._own_cpu = 0.0

    def _loop(self) -> None:
        try:
            self._realtime = _realtime()  # before its first wait: it wakes on time too
            while True:
                # Woken by a window asked for (a first one, or one that moved) or the stop.
                self._ready.wait()
                with self._lock:
                    self._ready.clear()
                    window, generation = self._window, self._generation
                if self._stop.is_set() or window is None:
                    return
                self._reset()
                begin, end = window
                if self._ready.wait(max(0.0, begin - time.monotonic())):
                    continue
                started_cpu = time.thread_time()
                whole = self._sample_window(end, generation)
                self._own_cpu = time.thread_time() - started_cpu
                with self._lock:
                    if whole and generation == self._generation:
                        self._closed.set()
        finally:
            self._closed.set()

    def _sample_window(self, end: float, generation: int) -> bool:
        """Sample until ``end`` (or the stop); False when the window moved first."""
        next_tick = time.monotonic()
        while True:
            if generation != self._generation:
                return False
            last = time.monotonic() >= end or self._stop.is_set()
            edge = not self._snapshots or last
            counters = self._edge_counters() if edge else {}
            self._sample()
            if edge:
                self._edge_scan(counters)
            if last:
                return True
            next_tick = min(next_tick + self.period, end)
            # Never in the last period: on a busy emulated core the timing can take a
            # large part of a second, which would delay the closing sample.
            if (
                self._speed_every
                and len(self._snapshots) % self._speed_every == 1
                and next_tick < end
            ):
                begin_cpu = time.thread_time()
                with _normal_priority(self._realtime):
                    self._speed_readings.append(speed.read(sorted(self._snapshots[-1][1])))
                self._speed_cpu += time.thread_time() - begin_cpu
            # Stopped early (the traffic ended before the window did, as when the
            # generator's connections came up a little before the runner saw them): the
            # next pass takes the closing sample and edge, so the window is only shorter.
            # A window that moved wakes it too.
            self._ready.wait(max(0.0, next_tick - time.monotonic()))

    def result(self) -> ProbeResult | None:
        """What was seen; None when the window never opened or held fewer than 2 samples."""
        self.stop()
        if len(self._snapshots) < 2:
            return None
        (t0, first, _), (t1, last, _) = self._snapshots[0], self._snapshots[-1]
        window = t1 - t0
        processes = {}
        for label in self._watched:
            # Over the samples that saw it: a generator that exited before the closing
            # sample (the traffic ended a little before the window) is measured up to
            # its last reading, not diluted by the time it no longer existed.
            seen = [(at, ticks[label]) for at, _, ticks in self._snapshots if ticks.get(label)]
            if len(seen) >= 2 and seen[-1][0] > seen[0][0]:
                (a0, before), (a1, after) = seen[0], seen[-1]
                assert before is not None and after is not None
                ticks = sum(after) - sum(before)
                processes[label] = round(process.percent_of_core(ticks, a1 - a0), 2)
        series: list[dict[str, float | list[float]]] = []
        for (_, a, _), (tb, b, _) in zip(self._snapshots, self._snapshots[1:], strict=False):
            cores = cpu.usage(a, b)
            # Per core, the busy share and the three parts the time series show (reports
            # of runs recorded before the parts show the busy share alone).
            series.append(
                {
                    "t": round(tb - t0, 3),
                    "busy": [round(c.busy, 1) for c in cores],
                    "user": [round(c.user, 1) for c in cores],
                    "system": [round(c.system, 1) for c in cores],
                    "softirq": [round(c.softirq, 1) for c in cores],
                }
            )
        result = ProbeResult(
            window_s=round(window, 3),
            cores=cpu.usage(first, last),
            processes=processes,
            samples=len(self._snapshots),
            sampler_cpu_pct=round(100.0 * self._own_cpu / window, 3) if window > 0 else 0.0,
            series=series,
            clocks=frequency.over_window(self._clock_readings),
            speeds=speed.over_window(self._speed_readings),
            speed_cost_ms=round(1000.0 * self._speed_cpu, 2) if self._speed_readings else None,
            realtime=self._realtime,
        )
        if self._window is not None:
            result.open_lag_ms = round(1000.0 * (t0 - self._window[0]), 1)
            result.close_lag_ms = round(1000.0 * (t1 - self._window[1]), 1)
        if len(self._edges) == 2:
            (at0, wall0, counters0, scan0), (at1, _, counters1, scan1) = self._edges
            if set(counters0) == set(counters1) == set(self._counters.namespaces):
                result.tcp_start, result.tcp_end = counters0, counters1  # else none: never half
            if self._namespaces:
                result.cpu_load = load.measure(
                    scan0,
                    scan1,
                    self._namespaces.values(),
                    at1 - at0,
                    own=os.getpid(),
                    started_at=wall0,
                )
                result.load_scan_ms = round(1000.0 * self._scan_cpu, 2)
            threads = self._threads
            if len(threads) == 2 and threads[0] is not None and threads[1] is not None:
                result.scheduling = scheduling.over_window(threads[0], threads[1])
        return result
