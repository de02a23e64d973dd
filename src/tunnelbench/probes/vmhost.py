"""The VM's host while its guest measures: what the VM used, and what else ran there.

A guest cannot see its host's contention. Under TCG no steal is accounted at all, and
outside load is counted among the guest's own processes: both read 0 in every trial of a
guest while the host was busy. So the host is watched from here, where the guest is
started: every :data:`PERIOD_S` a thread reads the host's ``/proc/stat`` and scans its
processes (:mod:`tunnelbench.probes.load`), and splits the CPU of each interval between
the VM (the guest's process tree: virtme-ng, QEMU; and the virtiofsd that serves the
guest's root, which virtme-ng starts detached and QEMU names by its socket), tunnelbench
itself, and everything else on the host: *outside* load, as on the host. Kernel threads
are left out of both (their time shows in the cores' figures).

The guest's measured window is in the guest's clock. Each event the guest writes carries
its clock (``at``) and is stamped with the host's when it is read (``host_at``); the
guest's clock is the host's less an offset, estimated as the smallest difference seen
(an event is read after it is written, never before), so a window maps to the host's
time to within the delay of one event (the exchange directory is polled every 50 ms).
"""

import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from tunnelbench.model import metrics as metric
from tunnelbench.probes import cpu, load
from tunnelbench.probes.process import TICKS_PER_SECOND

log = logging.getLogger("tunnelbench.probes.vmhost")

PERIOD_S = 0.5
#: Outside processes kept by name with each trial.
TOP = 5
#: The sockets QEMU's command line connects to (``-chardev socket,...,path=/tmp/virtme...``).
_SOCKET = re.compile(r"path=(/[^,\0]+)")


@dataclass(frozen=True)
class Interval:
    """The CPU of the host's processes between two samples, in clock ticks."""

    vm: int
    outside: int
    top: dict[str, int]  # outside program name -> ticks


@dataclass(frozen=True)
class Sample:
    at: float  # the host's Unix time
    cores: cpu.Snapshot
    interval: Interval | None  # since the sample before; None for the first


def descendants(root: int, parents: Mapping[int, int]) -> set[int]:
    """``root`` and every process whose chain of parents (pid -> ppid) reaches it."""
    found = {root}
    for pid in parents:
        chain, seen = pid, set()
        while chain not in found and chain in parents and chain not in seen:
            seen.add(chain)
            chain = parents[chain]
        if chain in found:
            found |= seen
    return found


def split(
    before: load.Scan, after: load.Scan, vm: Iterable[int], *, own: int | None = None
) -> Interval:
    """The ticks of each process between two scans (:func:`load.used_ticks`), as the
    VM's (``vm``: its PIDs), tunnelbench's (``own``: left out) or the outside's."""
    machine = set(vm)
    in_vm = out = 0
    top: dict[str, int] = {}
    for pid, ticks in load.used_ticks(before, after, own=own).items():
        if pid in machine:
            in_vm += ticks
        elif pid != own and ticks > 0:
            out += ticks
            comm = after[pid].times.comm
            top[comm] = top.get(comm, 0) + ticks
    return Interval(in_vm, out, top)


@dataclass(frozen=True)
class HostWindow:
    """The host over a guest trial's measured window (its own times)."""

    begin: float
    end: float
    samples: int
    vm_pct: float  # % of one host core
    outside_pct: float  # % of one host core
    busy_pct: float  # all host cores together, % of one core (2 busy cores: 200)
    cores: int
    steal_pct: float  # the host's most stolen core (when the host is itself a VM)
    top_outside: dict[str, float]

    def metrics(self) -> dict[str, float]:
        return {
            metric.VMHOST_OUTSIDE.name: self.outside_pct,
            metric.VMHOST_VM.name: self.vm_pct,
            metric.VMHOST_BUSY.name: self.busy_pct,
            metric.VMHOST_CORES.name: self.cores,
            metric.VMHOST_STEAL.name: self.steal_pct,
            metric.VMHOST_SAMPLES.name: self.samples,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "begin": round(self.begin, 3),
            "end": round(self.end, 3),
            "top_outside": self.top_outside,
        }


def over_window(samples: list[Sample], begin: float, end: float) -> HostWindow | None:
    """The host between the samples nearest ``begin`` and ``end`` (host Unix times);
    None when the samples do not cover the window."""
    if len(samples) < 2 or begin < samples[0].at or end > samples[-1].at or end <= begin:
        return None
    first = min(range(len(samples)), key=lambda i: abs(samples[i].at - begin))
    last = min(range(len(samples)), key=lambda i: abs(samples[i].at - end))
    if last <= first:
        return None
    seconds = samples[last].at - samples[first].at
    scale = 100.0 / TICKS_PER_SECOND / seconds
    vm = outside = 0
    top: dict[str, int] = {}
    for sample in samples[first + 1 : last + 1]:
        if sample.interval is not None:
            vm += sample.interval.vm
            outside += sample.interval.outside
            for comm, ticks in sample.interval.top.items():
                top[comm] = top.get(comm, 0) + ticks
    cores = cpu.usage(samples[first].cores, samples[last].cores)
    ranked = sorted(top.items(), key=lambda item: (-item[1], item[0]))[:TOP]
    return HostWindow(
        begin=samples[first].at,
        end=samples[last].at,
        samples=last - first + 1,
        vm_pct=round(vm * scale, 2),
        outside_pct=round(outside * scale, 2),
        busy_pct=round(sum(c.busy for c in cores), 2),
        cores=len(cores),
        steal_pct=round(max((c.steal for c in cores), default=0.0), 2),
        top_outside={comm: round(ticks * scale, 1) for comm, ticks in ranked},
    )


#: Events whose stamps the clock's offset is taken from: the latest few, so that an
#: emulated guest's clock drifting from the host's over a long run is followed.
CLOCK_EVENTS = 4


@dataclass
class Clock:
    """The guest's clock against the host's, from the events' two stamps."""

    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=CLOCK_EVENTS))

    def saw(self, event: Mapping[str, Any]) -> None:
        guest, host = event.get("at"), event.get("host_at")
        if isinstance(guest, int | float) and isinstance(host, int | float):
            self.gaps.append(float(host) - float(guest))

    @property
    def offset(self) -> float | None:
        """Host time less guest time: the smallest gap of the latest events (each event
        is read after it was written, so each gap is the offset plus a delay)."""
        return min(self.gaps) if self.gaps else None

    def to_host(self, guest_time: float) -> float | None:
        offset = self.offset
        return None if offset is None else guest_time + offset


def guest_window(record: Mapping[str, Any]) -> tuple[float, float] | None:
    """A guest trial's measured window in the guest's clock: its process scans' (the
    window's two edges, ``probes.cpu_load``); None for a trial without them."""
    found = ((record.get("artifacts") or {}).get("probes") or {}).get("cpu_load") or {}
    begin, seconds = found.get("started_at"), found.get("seconds")
    if not isinstance(begin, int | float) or not isinstance(seconds, int | float):
        return None
    return float(begin), float(begin) + float(seconds)


@dataclass
class HostWatch:
    """``start()`` once the guest's process is running (``leader``: its PID, the root of
    the VM's process tree), :meth:`window` for each trial, ``stop()`` at the end."""

    leader: int
    period: float = PERIOD_S
    samples: list[Sample] = field(default_factory=list)
    #: The watcher's own CPU time, seconds (its cost on the host).
    cost_s: float = 0.0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="tb-vm-host", daemon=True)
        self._sockets: set[str] = set()
        self._named: dict[tuple[int, int], bool] = {}  # (pid, start) -> a VM helper

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def window(self, begin: float, end: float) -> HostWindow | None:
        """The host over ``begin``-``end`` (host times); samples older than it are
        dropped (the trials come in order)."""
        with self._lock:
            found = over_window(self.samples, begin, end)
            keep = next((i for i, s in enumerate(self.samples) if s.at >= begin), 0)
            del self.samples[: max(0, keep - 1)]
        return found

    def _loop(self) -> None:
        began = time.thread_time()
        previous: load.Scan | None = None
        while not self._stop.is_set():
            try:
                at, cores, scan = time.time(), cpu.read_snapshot(), load.scan()
                interval = None
                if previous is not None:
                    interval = split(previous, scan, self._vm(scan), own=os.getpid())
                with self._lock:
                    self.samples.append(Sample(at, cores, interval))
                previous = scan
            except (OSError, ValueError) as exc:  # the figures of a window are then missing
                log.debug("host sample failed: %s", exc)
            self.cost_s = time.thread_time() - began
            self._stop.wait(self.period)

    def _vm(self, scan: load.Scan) -> set[int]:
        """The VM's processes now: the guest's process tree, and any process that serves
        one of the sockets QEMU was given (virtiofsd, started detached)."""
        tree = descendants(self.leader, {pid: seen.times.ppid for pid, seen in scan.items()})
        tree &= scan.keys()  # virtme-ng itself may have ended (the guest is stopping)
        if not self._sockets:
            for pid in tree:
                if scan[pid].times.comm.startswith("qemu-system"):
                    self._sockets |= set(_SOCKET.findall(_cmdline(pid)))
        helpers = set()
        for pid, seen in scan.items():
            if pid in tree or not self._sockets:
                continue
            key = (pid, seen.times.start)
            if key not in self._named:
                words = _cmdline(pid).split("\0")
                self._named[key] = any(
                    a == "--socket-path" and b in self._sockets for a, b in pairwise(words)
                )
            if self._named[key]:
                helpers.add(pid)
        return tree | helpers


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
