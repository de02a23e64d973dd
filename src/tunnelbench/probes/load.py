"""CPU used during the measured window by the lab's processes and by everything else.

Two scans of ``/proc``, one as the window opens and one as it closes (never during the
sampler's 10 Hz loop), read every process's ``/proc/PID/stat`` and network namespace
(``/proc/PID/ns/net``). A process is the lab's when it lives in one of the lab's
namespaces; any other process (the host namespace, another lab, a container) is
*outside* load. Left out: kernel threads (``PF_KTHREAD``; their time shows as system and
softirq in ``/proc/stat`` anyway) and the tunnelbench process's own threads, whose
sampler cost is recorded as ``sampler.cpu_pct``.

What a process used over the window is the growth of its own ``utime + stime`` plus the
growth of ``cutime + cstime``, the time of the children it reaped (with all their own
reaped descendants), less what those children had used before the window began. So:

- a process that started within the window counts all its time;
- a process that ended within the window counts through the ancestor that lived through
  it and reaped it (directly or through parents that ended too): a compiler run by
  ``make``, a command run by a shell loop, and the lab's generators, which tunnelbench
  reaps (its reaped children are the lab's; they often end as the window closes);
- a process that has exited but is not yet reaped (a zombie) counts its own time, in
  the namespace it had at the start (a zombie has none any more).

A process that ended within the window is subtracted from its nearest ancestor that
lived through it (its parent may have ended too: its time reaches that ancestor through
both). Missed: a process reaped by another parent than the one it had at the start (an
orphan re-parented to init): its time before the window is then not subtracted from
init's, and its old parent's figure is short by it (never below zero). Time is counted
in clock ticks (``SC_CLK_TCK``, 10 ms here): each process's figure is good to about one
tick per scan. The two scans' CPU time is recorded per trial as ``load.scan_ms``: on
this 2-core machine 10-22 ms together with four iperf3 pairs running (15-46 ms before
kernel threads' links were skipped), in a TCG guest 220-550 ms.
"""

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tunnelbench.errors import LabError
from tunnelbench.probes.process import TICKS_PER_SECOND

PF_KTHREAD = 0x00200000  # include/linux/sched.h
#: Where the flags are among a `stat` line's fields after the command name (field 9 of proc(5)).
FLAGS = 6
NETNS_DIR = Path("/run/netns")  # where `ip netns` mounts the named namespaces
TOP = 5  # outside processes kept by name with each trial


@dataclass(frozen=True)
class ProcessTimes:
    """One process as one scan saw it (times in clock ticks)."""

    comm: str
    ppid: int
    start: int  # starttime: tells a reused PID from the process seen before
    own: int  # utime + stime
    reaped: int  # cutime + cstime
    kernel_thread: bool


def parse_stat(text: str) -> ProcessTimes:
    """A ``/proc/PID/stat`` line (proc(5)); the command name may hold spaces and ')'."""
    head, tail = text.rsplit(")", 1)
    comm = head.split("(", 1)[1]
    fields = tail.split()  # fields[0] is field 3 of proc(5), the state
    return ProcessTimes(
        comm=comm,
        ppid=int(fields[1]),
        start=int(fields[19]),
        own=int(fields[11]) + int(fields[12]),
        reaped=int(fields[13]) + int(fields[14]),
        kernel_thread=_kthread(fields[FLAGS]),
    )


def netns_inode(link: str) -> int | None:
    """The inode of ``net:[4026531840]``, the target of ``/proc/PID/ns/net``."""
    if link.startswith("net:[") and link.endswith("]"):
        return int(link[5:-1])
    return None


@dataclass(frozen=True)
class Seen:
    times: ProcessTimes
    netns: int | None  # None: could not be read (a process that just exited)


Scan = dict[int, Seen]


def scan(proc: Path = Path("/proc")) -> Scan:
    """Every user-space process now; a process that vanishes while it is read is left
    out."""
    return from_raw(read_raw(proc))


def read_raw(proc: Path = Path("/proc")) -> dict[int, tuple[str, str | None]]:
    """PID -> (its ``stat`` line, the target of its ``ns/net`` link or None).

    A kernel thread's link is not read (None): it is left out anyway, and in a VM guest
    under TCG, where a scan took 0.3 s of a starved core, those calls were half of it.
    Paths are plain strings for the same reason."""
    raw: dict[int, tuple[str, str | None]] = {}
    root = str(proc)
    for entry in os.scandir(root):
        if not entry.name.isdigit():
            continue
        folder = f"{root}/{entry.name}"
        try:
            with open(f"{folder}/stat", encoding="utf-8", errors="replace") as file:
                stat = file.read()
        except OSError:
            continue  # ended since the directory was listed
        link: str | None = None
        if not _kernel_thread(stat):
            with contextlib.suppress(OSError):  # a process that has exited: None
                link = os.readlink(f"{folder}/ns/net")
        raw[int(entry.name)] = (stat, link)
    return raw


def _kernel_thread(stat: str) -> bool:
    """Whether a ``stat`` line is a kernel thread's, splitting only up to its flags;
    False if unreadable."""
    try:
        return _kthread(stat.rsplit(")", 1)[1].split(None, FLAGS + 1)[FLAGS])
    except (IndexError, ValueError):
        return False


def _kthread(flags: str) -> bool:
    return bool(int(flags) & PF_KTHREAD)


def from_raw(raw: Mapping[int, tuple[str, str | None]]) -> Scan:
    """The user-space processes of :func:`read_raw`'s readings."""
    found: Scan = {}
    for pid, (stat, link) in raw.items():
        try:
            times = parse_stat(stat)
        except (ValueError, IndexError):
            continue
        if not times.kernel_thread:
            found[pid] = Seen(times, None if link is None else netns_inode(link))
    return found


def namespace_inodes(names: Mapping[str, str], directory: Path = NETNS_DIR) -> dict[str, int]:
    """The inode of each named network namespace (role -> ``ip netns`` name); the same
    number ``/proc/PID/ns/net`` shows for a process inside it."""
    inodes = {}
    for role, name in names.items():
        try:
            inodes[role] = (directory / name).stat().st_ino
        except OSError as exc:
            raise LabError(f"cannot find the lab's namespace {name}: {exc.strerror}") from None
    return inodes


@dataclass(frozen=True)
class Busy:
    pid: int
    comm: str
    pct: float  # percent of one core over the window


@dataclass(frozen=True)
class Load:
    """CPU over the window, in percent of one core (2 busy cores: 200)."""

    lab_pct: float
    outside_pct: float
    top_outside: list[Busy]  # the busiest outside processes, at most :data:`TOP`
    seconds: float  # between the two scans
    processes: int  # seen by the closing scan
    started_at: float | None = None  # the first scan, Unix time

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def used_ticks(before: Scan, after: Scan, *, own: int | None = None) -> dict[int, int]:
    """Clock ticks each process of ``after`` used since ``before`` (see the module's
    notes for processes that start or end in between); for process ``own`` only the time
    of the children it reaped in between."""
    alive = {pid for pid, seen in after.items() if _same(before.get(pid), seen)}
    ended_by_parent: dict[int, int] = {}
    for pid, seen in before.items():
        if pid not in alive:  # ended (or its PID was reused): reaped by its parent
            parent = _alive_ancestor(seen.times.ppid, before, alive)
            total = seen.times.own + seen.times.reaped
            ended_by_parent[parent] = ended_by_parent.get(parent, 0) + total
    used: dict[int, int] = {}
    for pid, seen in after.items():
        now = seen.times.own + seen.times.reaped
        if pid in alive:
            then = before[pid].times
            ticks = now - then.own - then.reaped - ended_by_parent.get(pid, 0)
            if pid == own:
                ticks -= seen.times.own - then.own
        else:
            ticks = now  # started within the window
        used[pid] = max(0, ticks)
    return used


def _alive_ancestor(pid: int, before: Scan, alive: set[int]) -> int:
    """The nearest of ``pid`` and its ancestors (as at the start) that lived through the
    window: a child's time reaches it through every parent that ended in between (a
    shell ran ``timeout``, which ran a test run: both ended; the shell reaped both)."""
    seen: set[int] = set()
    while pid not in alive and pid in before and pid not in seen:
        seen.add(pid)
        pid = before[pid].times.ppid
    return pid


def _same(before: Seen | None, after: Seen) -> bool:
    return before is not None and before.times.start == after.times.start


def measure(
    before: Scan,
    after: Scan,
    lab: Iterable[int],
    seconds: float,
    *,
    own: int | None = None,
    started_at: float | None = None,
) -> Load:
    """Split the window's CPU between the lab's namespaces (``lab``: their inodes) and
    everything else. ``own``: the tunnelbench process, whose own time is left out and
    whose reaped children (the lab's processes it started) count as the lab's."""
    lab_inodes = set(lab)
    scale = 100.0 / TICKS_PER_SECOND / seconds if seconds > 0 else 0.0
    lab_ticks = outside_ticks = 0
    outside: list[Busy] = []
    for pid, ticks in used_ticks(before, after, own=own).items():
        seen = after[pid]
        netns = seen.netns
        if netns is None and _same(before.get(pid), seen):
            netns = before[pid].netns  # exited at the window's end: a zombie has none
        if pid == own or (netns is not None and netns in lab_inodes):
            lab_ticks += ticks
        else:
            outside_ticks += ticks
            if ticks > 0:
                outside.append(Busy(pid, seen.times.comm, round(ticks * scale, 1)))
    outside.sort(key=lambda b: (-b.pct, b.pid))
    return Load(
        lab_pct=round(lab_ticks * scale, 2),
        outside_pct=round(outside_ticks * scale, 2),
        top_outside=outside[:TOP],
        seconds=round(seconds, 3),
        processes=len(after),
        started_at=None if started_at is None else round(started_at, 3),
    )
