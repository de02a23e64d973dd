"""A black box's SNMP agent read as an instrument with a delay.

An agent answers from tables it refreshes on its own clock (net-snmp: its interface table
when a request finds it older than its cache time, its CPU counters on a timer), so a
value read at a moment is as of the agent's last refresh. A trial polls the agent from
before its traffic until after it (:class:`Watch`, every :data:`POLL_S`); a poll whose
values differ from the one before saw a refresh, which happened between the two polls
(:class:`Seen`). From those refreshes, not from the moments of the reads:

- the agent's refresh intervals, measured while the traffic ran (``if_refresh_s``,
  ``cpu_refresh_s``);
- the closing reading of the interfaces: the first refresh after the traffic ended, and
  how long after the end it came (``close_delay_s``); polling goes on until it comes;
- the CPU share: between the CPU refresh nearest the window's start (not before the
  traffic's) and the last one before its end, so that no idle time after the traffic is
  in it; the seconds its counters covered are held against the span the polls place
  those refreshes at, and a span that disagrees gives no share, saying why;
- refreshes that added no bytes to an interface while its packets rose: net-snmp's IF-MIB
  on Linux checks each refresh for a 32-bit counter's wrap and discards the update of a
  64-bit counter whose high word rose by two or more, so a refresh interval that carries
  more than 4 GiB may add nothing to ``ifHC*Octets`` (at 30 Gbit/s most of a trial's
  bytes were lost so). Such an interface's byte counts are not stored, and the check of
  the traffic reads the agent's packets and the ends' kernels instead.
"""

import logging
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from tunnelbench.errors import LabError
from tunnelbench.model import metrics as metric
from tunnelbench.remote import snmp

log = logging.getLogger(__name__)

#: Seconds between two polls of the agent: the precision of every refresh's place.
POLL_S = 0.5
#: How far a CPU span's length may stray from the span its refreshes were placed at
#: (ticks of 1/100 s, each core's counter read at its own moment).
SPAN_SLACK_S = 0.3
#: Interface counter pairs: bytes that a refresh may drop, with the packets that show it.
PAIRS = (("tx_bytes", "tx_packets"), ("rx_bytes", "rx_packets"))


@dataclass(frozen=True)
class Poll:
    """One reading of the agent: asked at ``asked``, answered in ``snapshot``."""

    asked: float
    snapshot: snmp.Snapshot

    @property
    def at(self) -> float:
        return self.snapshot.at


@dataclass(frozen=True)
class Seen:
    """A refresh the polls saw: it happened after ``after`` and by ``at``; ``snapshot``
    holds the values it gave."""

    after: float
    at: float
    snapshot: snmp.Snapshot


def _interfaces(snapshot: snmp.Snapshot) -> object:
    return snapshot.counters


def _cpu(snapshot: snmp.Snapshot) -> object:
    # net-snmp serves every ssCpuRaw* as 0 until its first load, 5 s after it starts;
    # the next values are since boot: a span from those zeros is the host's uptime.
    return snapshot.cpu if any(snapshot.cpu.values()) else {}


def refreshes(polls: Sequence[Poll], part: Callable[[snmp.Snapshot], object]) -> list[Seen]:
    """The refreshes of ``part`` (:func:`_interfaces` or :func:`_cpu`) that ``polls`` saw:
    each poll whose values differ from the poll before."""
    return [
        Seen(before.asked, now.at, now.snapshot)
        for before, now in pairwise(polls)
        if part(now.snapshot) and part(now.snapshot) != part(before.snapshot)
    ]


def interval(seen: Sequence[Seen]) -> float | None:
    """The agent's refresh interval: the median time between refreshes seen one after
    the other while the traffic ran (every refresh then changes the counters); None with
    fewer than two seen."""
    gaps = [b.at - a.at for a, b in pairwise(seen)]
    return round(statistics.median(gaps), 2) if gaps else None


def closed(polls: Sequence[Poll], ended: float) -> Seen | None:
    """The first interface refresh after the traffic ended (None: not seen yet)."""
    return next((s for s in refreshes(polls, _interfaces) if s.after >= ended), None)


def discarded(seen: Sequence[Seen], device: snmp.Device) -> dict[str, int]:
    """``ifname.<bytes field>`` -> how many refreshes added packets to that counter's
    direction and no bytes (an update the agent discarded)."""
    found: dict[str, int] = {}
    for a, b in pairwise(seen):
        for index, name in device.interfaces.items():
            start, end = a.snapshot.counters.get(index, {}), b.snapshot.counters.get(index, {})
            for size, count in PAIRS:
                both = {size, count} <= start.keys() & end.keys()
                if both and end[size] == start[size] and end[count] > start[count]:
                    found[f"{name}.{size}"] = found.get(f"{name}.{size}", 0) + 1
    return found


@dataclass
class Figures:
    """What a trial's polls give: metrics, what could not be given and why (``notes``),
    and the record kept with the trial's artifacts."""

    metrics: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)


def figures(
    role: str,
    device: snmp.Device,
    polls: Sequence[Poll],
    *,
    traffic_from: float,
    begin: float,
    end: float,
    ended: float,
) -> Figures:
    """The agent's figures of one trial: the interfaces over the whole trial (the first
    poll, before the traffic, to the first refresh after it ended), the CPU over the
    window [``begin``, ``end``], and the measured refresh intervals. ``traffic_from``: no
    traffic ran before it; ``ended``: none ran after it."""
    out = Figures()

    def key(name: str) -> str:
        return metric.snmp(role, name)

    seen_if, seen_cpu = refreshes(polls, _interfaces), refreshes(polls, _cpu)
    if_every, cpu_every = interval(seen_if), interval(seen_cpu)
    if if_every is not None:
        out.metrics[key(metric.SNMP_IF_REFRESH)] = if_every
    if cpu_every is not None:
        out.metrics[key(metric.SNMP_CPU_REFRESH)] = cpu_every
    out.record = {
        "polls": len(polls),
        "interface_refreshes": [round(s.at - begin, 2) for s in seen_if],
        "cpu_refreshes": [round(s.at - begin, 2) for s in seen_cpu],
    }
    if not polls:
        out.notes.append(f"{role}'s SNMP agent answered no poll")
        return out
    last = closed(polls, ended)
    if last is not None:
        out.metrics[key(metric.SNMP_CLOSE_DELAY)] = round(last.at - ended, 2)
        closing = last.snapshot
    else:
        closing = polls[-1].snapshot
        waited = polls[-1].at - ended
        out.notes.append(
            f"{role}'s SNMP agent showed no refresh of its interfaces in the {waited:.1f} s"
            " after the traffic ended: its closing counts may lack the traffic's last"
            f" seconds (raise {role}.snmp_cache to the agent's refresh interval)"
        )
    links = snmp.link_metrics(role, device, polls[0].snapshot, closing)
    lost = discarded(seen_if, device)
    for name, count in sorted(lost.items()):
        links.pop(metric.link(role, *name.rsplit(".", 1)), None)
        out.notes.append(
            f"{role}'s SNMP agent discarded {count} refresh(es) of {name} (its packets rose,"
            " its bytes did not: net-snmp drops an update of more than 4 GiB, taking it for"
            f" a 32-bit counter's wrap{_rate(if_every)}): those byte counts are not stored"
        )
    if lost:
        out.metrics[key(metric.SNMP_DISCARDED)] = float(sum(lost.values()))
    out.metrics |= links
    if device.cpu_counters:  # else `hosts check` says it serves none
        cpu, why = _cpu_span(role, device, seen_cpu, traffic_from, begin, end)
        out.metrics |= cpu
        if why:
            out.notes.append(why)
    out.metrics[key(metric.SNMP_WINDOW)] = round(end - begin, 3)
    return out


def _rate(every: float | None) -> str:
    """Above what rate that happens at the measured interval."""
    if every is None or every <= 0:
        return ""
    return f"; at its {every:g} s refresh, above {(1 << 32) * 8 / every / 1e9:.1f} Gbit/s"


def _cpu_span(
    role: str,
    device: snmp.Device,
    seen: Sequence[Seen],
    traffic_from: float,
    begin: float,
    end: float,
) -> tuple[dict[str, float], str]:
    """The CPU share between two CPU refreshes that bracket as much of the window as the
    agent's clock allows with traffic throughout: the refresh nearest ``begin`` (not
    before ``traffic_from``) and the last one by ``end``. ``("", why)`` where none fit."""
    inside = [s for s in seen if s.after >= traffic_from and s.at <= end]
    if len(inside) < 2:
        return {}, (
            f"{role}'s SNMP CPU counters refreshed {len(inside)} time(s) while the traffic"
            " ran: no CPU share for the window (a longer traffic.duration gives one)"
        )
    first = min(inside[:-1], key=lambda s: abs((s.after + s.at) / 2 - begin))
    last = inside[-1]
    found = snmp.cpu_metrics(role, device, first.snapshot, last.snapshot)
    covered = found.get(metric.snmp(role, metric.SNMP_CPU_COVERED))
    low, high = last.after - first.at - SPAN_SLACK_S, last.at - first.after + SPAN_SLACK_S
    if covered is None:
        return {}, f"{role}'s SNMP CPU counters did not move, or its cores are not given"
    if not low <= covered <= high:
        return {}, (
            f"{role}'s SNMP CPU counters covered {covered:,.1f} s between two refreshes the"
            f" polls placed {max(low, 0):.1f}-{high:.1f} s apart: not the window's, no CPU"
            " share stored"
        )
    return found, ""


class Watch:
    """Polls an agent on a thread of its own from :meth:`start` until :meth:`close`."""

    def __init__(self, reader: snmp.Reader, device: snmp.Device) -> None:
        self.reader, self.device = reader, device
        self.polls: list[Poll] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> None:
        asked = time.monotonic()
        try:
            self.polls.append(Poll(asked, self.reader.snapshot(self.device)))
        except LabError as exc:  # one lost answer: the next poll places the refresh
            self.failures.append(str(exc))

    def start(self) -> None:
        """The first poll (before the traffic: the interfaces' start), then the thread."""
        self.poll()
        if not self.polls:
            raise LabError(self.failures[-1])
        self._thread = threading.Thread(target=self._run, name="snmp-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self.poll()

    def close(self, ended: float, bound_s: float) -> None:
        """Poll on until a refresh after ``ended`` is seen, at most ``bound_s`` past it
        (or one measured interval and two polls, where that is longer)."""
        every = interval(refreshes(self.polls, _interfaces)) or 0.0
        deadline = ended + max(bound_s, every + 2 * POLL_S)
        while time.monotonic() < deadline and closed(self.polls, ended) is None:
            time.sleep(POLL_S / 2)
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
