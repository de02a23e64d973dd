"""Whether a trial measured the path in steady state or the start-up transient.

A big FIFO fills slowly: cubic at 30 Mbit/s and 40 ms needs about 11 s to fill 600
packets, and a trial that ends first measures a loaded RTT of 151 ms where the steady
state gives ~280 ms, with none of the drops that follow, so the bloated queue looks
like the one with the fewest retransmits. A trial is in steady state when neither its
round trip nor its goodput still moves in one direction across its measured window: the
last third of the window is held against the first (the medians of the loaded pings,
the mean goodput of the receivers' intervals). A rise in either beyond
:data:`RTT_RISE_PCT` / :data:`GOODPUT_RISE_PCT` (and, for the round trip, at least
:data:`RTT_RISE_MS`, so that a sub-millisecond path's jitter is not read as a trend) is
a queue still filling or a sender still ramping up: the trial is flagged, with the
figures, rather than averaged in silence. A fall is not: a queue that drains after its
first overflow, or a flow that lost its first packets, is the steady state's own cycle.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from tunnelbench.model import metrics as metric


@dataclass(frozen=True)
class QueueReading:
    """One reading of a queue: when (monotonic s), what it held, and its drops so far (a
    machine's TCP senders, :func:`is_senders`: their bytes in flight, the sum of their
    windows in segments, and their loss recoveries)."""

    at: float
    backlog_bytes: int
    backlog_packets: int
    drops: int  # a counter: its rise since the first reading is what counts


#: Queue (``role.link``) -> its readings, the first taken before the traffic began.
QueueSeries = Mapping[str, Sequence[QueueReading]]


#: The round trip's rise over the window that marks a queue still filling: % and ms.
RTT_RISE_PCT = 25.0
RTT_RISE_MS = 1.0
#: The goodput's rise over the window that marks a sender still ramping up.
GOODPUT_RISE_PCT = 15.0
#: The bound of a stored trend's t statistic (a noiseless series' is infinite).
TREND_T_CAP = 1000.0
#: A full TCP segment with timestamps on a 1500-byte path: the unit a window grows by.
SEGMENT_BYTES = 1448


def thirds(series: list[float]) -> tuple[float, float] | None:
    """The means of the first and the last third of a series (at least three values)."""
    if len(series) < 3:
        return None
    size = len(series) // 3
    return sum(series[:size]) / size, sum(series[-size:]) / size


def goodput_thirds(intervals_bps: list[float]) -> dict[str, float]:
    """``goodput.first_bps`` and ``goodput.last_bps`` of a trial's receiver intervals."""
    pair = thirds(intervals_bps)
    if pair is None:
        return {}
    return {metric.GOODPUT_FIRST.name: pair[0], metric.GOODPUT_LAST.name: pair[1]}


def trend_t(samples: list[tuple[float, float]]) -> float | None:
    """The t statistic of a series' least-squares slope (:func:`slope`), held within
    ±:data:`TREND_T_CAP` (a noiseless series' is infinite); None without a slope."""
    fit = slope(samples)
    if fit is None:
        return None
    return round(max(-TREND_T_CAP, min(TREND_T_CAP, fit[1])), 2)


def goodput_trend(fine_bps: list[float], step_s: float = 0.1) -> dict[str, float]:
    """``goodput.trend_t`` of the receivers' 0.1 s intervals over the window."""
    found = trend_t([(k * step_s, v) for k, v in enumerate(fine_bps)])
    return {} if found is None else {metric.GOODPUT_TREND.name: found}


def ramp_seconds(metrics: dict[str, float]) -> float | None:
    """How long a sender growing its window by one segment a round trip (as a loss-based
    sender at least does) takes to fill the path at the trial's goodput and idle round
    trip: the segments in flight times the round trip. None without the figures."""
    goodput, idle = metrics.get(metric.GOODPUT.name), metrics.get(metric.RTT_IDLE.name)
    if goodput is None or idle is None:
        return None
    rtt_s = idle / 1000
    return goodput * rtt_s / (8 * SEGMENT_BYTES) * rtt_s


def unsteady(metrics: dict[str, float]) -> tuple[str, ...]:
    """What still moved across one trial's measured window, in words; empty when it was
    in steady state (or the trial was recorded before these metrics were): a warm-up
    that reached its bound, and :func:`window_rising`."""
    found = []
    if metrics.get(metric.WARMUP_STEADY.name) == 0:
        found.append(
            f"not steady: the warm-up reached its bound ({metrics.get(metric.WARMUP_S.name, 0):.1f}"
            " s) before the path settled (raise traffic.warmup_max)"
        )
    return (*found, *window_rising(metrics))


def queue_windows(metrics: dict[str, float]) -> dict[str, dict[str, float]]:
    """``role.link`` -> its ``window_*`` figures of every watched queue: a qdisc's
    (:func:`tunnelbench.probes.qdisc.window_metrics`) and a machine's TCP senders'
    (``role.cwnd``, :mod:`tunnelbench.probes.senders`)."""
    found: dict[str, dict[str, float]] = {}
    for name, value in metrics.items():
        parsed = metric.parse_device(name, "qdisc") or metric.parse_device(name, "tcp")
        if parsed is not None and parsed[1].startswith("window_"):
            found.setdefault(parsed[0], {})[parsed[1]] = value
    return found


def _window_levels(name: str, figures: dict[str, float]) -> tuple[float, float]:
    """A queue's mean level over the window's first and last third, as stored: a
    qdisc's ``window_first_bytes``, the senders' ``window_first`` (segments)."""
    unit = "" if is_senders(name) else "_bytes"
    return figures.get(f"window_first{unit}", 0.0), figures.get(f"window_last{unit}", 0.0)


def _trend(metrics: dict[str, float], trend: metric.Metric) -> bool:
    """Whether the window's series rose significantly (:data:`TREND_T`); True for a trial
    stored before its trend was (its thirds alone judge it)."""
    found = metrics.get(trend.name)
    return found is None or found >= TREND_T


def window_rising(metrics: dict[str, float]) -> tuple[str, ...]:
    """What rose across the measured window, in words: the window's own verdict, stored
    with the trial as ``window.steady``.

    Where a WAN queue was watched its evidence decides: one still filling (its backlog
    rose, with no drop since the traffic began) is named with its figures; one that held
    a standing queue and was not filling is the bottleneck in steady state, whose
    round trip rises and falls with the loss cycle (after each drop a cubic sender
    regrows its window over seconds), and nothing else is judged. Without either, the
    loaded round trip and the goodput are."""
    queues = queue_windows(metrics)
    filling = [
        "not steady: "
        + still_filling(name, "across the window", *_window_levels(name, q))[:-1]
        + "; lengthen traffic.warmup)"
        for name, q in sorted(queues.items())
        if q.get("window_filling") == 1
    ]
    if filling or any(q.get("window_standing") == 1 for q in queues.values()):
        return tuple(filling)
    found = []
    first, last = metrics.get(metric.RTT_FIRST.name), metrics.get(metric.RTT_LAST.name)
    if first is not None and last is not None and _trend(metrics, metric.RTT_TREND):
        rise = last - first
        if rise >= RTT_RISE_MS and rise >= first * RTT_RISE_PCT / 100:
            found.append(
                f"not steady: loaded RTT rose {first:,.1f} → {last:,.1f} ms across the window"
                " (a queue still filling; lengthen traffic.warmup)"
            )
    first, last = metrics.get(metric.GOODPUT_FIRST.name), metrics.get(metric.GOODPUT_LAST.name)
    ramp, window = ramp_seconds(metrics), metrics.get(metric.GOODPUT_WINDOW.name)
    ramps = ramp is None or window is None or ramp >= window / 3
    if first is not None and last is not None and first > 0 and ramps:
        rise_pct = 100 * (last - first) / first
        if rise_pct >= GOODPUT_RISE_PCT and _trend(metrics, metric.GOODPUT_TREND):
            found.append(
                f"not steady: goodput rose {rise_pct:.0f}% across the window"
                f" ({first / 1e6:,.1f} → {last / 1e6:,.1f} Mbit/s; lengthen traffic.warmup)"
            )
    return tuple(found)


# --- ending the warm-up on evidence: is the path in steady state now? ---

#: The shortest stretch of samples a trend is judged over, and the fewest samples in it.
SETTLE_S = 0.5
SETTLE_SAMPLES = 5
#: How far the pings may lag the clock and still be judged up to their latest reply: a
#: real client's ping output is read over SSH, 0.1-0.3 s behind (judged up to ``now``,
#: the last half second held 4 of its 5 replies, and no warm-up ever ended).
READ_LAG_S = 0.5
#: A series rises when its slope is this many standard errors above zero and would raise
#: it by more than :data:`TREND_PCT` of its level over the measured duration.
TREND_T = 3.0
TREND_PCT = 10.0


def settle_seconds(rtt_ms: float | None) -> float:
    """How long a stretch a trend is judged over: :data:`SETTLE_S`, or ten round trips
    of the loaded path (a sender's window grows once per round trip, so a queue filling
    behind a long or bloated path moves slowly)."""
    return max(SETTLE_S, 10 * (rtt_ms or 0.0) / 1000)


def slope(samples: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The least-squares slope of (time, value) samples per second and its t statistic
    (slope over its standard error; infinite for a noiseless trend); None for fewer
    than three samples or no spread in time."""
    n = len(samples)
    if n < 3:
        return None
    mean_t = sum(t for t, _ in samples) / n
    mean_v = sum(v for _, v in samples) / n
    sxx = sum((t - mean_t) ** 2 for t, _ in samples)
    if sxx <= 0:
        return None
    b = sum((t - mean_t) * (v - mean_v) for t, v in samples) / sxx
    residual = sum((v - mean_v - b * (t - mean_t)) ** 2 for t, v in samples)
    error = (residual / (n - 2) / sxx) ** 0.5
    if error == 0:
        return b, (float("inf") if b else 0.0)
    return b, b / error


def rising(
    samples: list[tuple[float, float]], duration_s: float, floor: float, *, relative: bool = True
) -> bool:
    """Whether a series still rises: its slope is significant (:data:`TREND_T`) and would
    raise it by more than ``floor`` (in its unit) and, where ``relative``, by more than
    :data:`TREND_PCT` of its level, over ``duration_s``. A fall is not a rise: a queue
    draining after its first overflow is the loss cycle a loss-based sender settles into."""
    fit = slope(samples)
    if fit is None:
        return False
    b, t = fit
    level = sum(v for _, v in samples) / len(samples) if relative else 0.0
    return t >= TREND_T and b * duration_s > max(abs(level) * TREND_PCT / 100, floor)


def _judged(
    samples: list[tuple[float, float]], now: float, stretch: float, since: float
) -> list[tuple[float, float]]:
    """The samples of the stretch before ``now``; where it holds fewer than
    :data:`SETTLE_SAMPLES` (a real host's counters, read over SSH 3 times a second), the
    last that many since the traffic began: a longer stretch, never a thinner one. A
    series with no sample in the stretch is not judged (it stopped: stale)."""
    found = recent(samples, now, stretch)
    if len(found) >= SETTLE_SAMPLES or not found:
        return found
    return [(t, v) for t, v in samples if since <= t <= now][-SETTLE_SAMPLES:]


def recent(
    samples: list[tuple[float, float]], now: float, seconds: float
) -> list[tuple[float, float]]:
    """The samples of the last ``seconds`` before ``now``."""
    return [(t, v) for t, v in samples if now - seconds <= t <= now]


def judged(
    rtt_ms: list[tuple[float, float]],
    rate_bps: list[tuple[float, float]],
    *,
    now: float,
    since: float,
    duration_s: float,
    queues: QueueSeries | None = None,
) -> tuple[bool, str] | None:
    """Whether the path was in steady state over the last :func:`settle_seconds` before
    ``now`` (traffic watched from ``since``), and why. Where the bottleneck's queue is
    read (``queues``) and holds a queue, its own evidence decides
    (:func:`queue_judged`): still filling with no drop yet, or full. Otherwise: (True,
    why) when neither the loaded round trip nor the delivered rate rises over it, (False,
    what rises) when one does; None while there is not yet the evidence: the stretch has
    not passed since ``since``, a watched queue has not yet given its readings, or
    either series holds fewer than :data:`SETTLE_SAMPLES` samples in it. Both are judged
    up to the latest reply where the pings lag the clock by up to :data:`READ_LAG_S`."""
    clock = now
    if rtt_ms and now - READ_LAG_S <= rtt_ms[-1][0] < now:
        now = rtt_ms[-1][0]
    latest = [v for _, v in recent(rtt_ms, now, SETTLE_S)]
    stretch = settle_seconds(sorted(latest)[len(latest) // 2] if latest else None)
    if clock - since < stretch:
        return None
    if queues and (
        found := queue_judged(
            queues, now=clock, stretch=stretch, duration_s=duration_s, since=since
        )
    ):
        verdict, why = found
        return None if verdict is None else (verdict, why)
    if now - since < stretch:
        return None
    rtts, rates = _judged(rtt_ms, now, stretch, since), _judged(rate_bps, now, stretch, since)
    if len(rtts) < SETTLE_SAMPLES or len(rates) < SETTLE_SAMPLES:
        return None
    if rising(rtts, duration_s, RTT_RISE_MS):
        return False, f"the RTT rose over {stretch:.1f} s"
    if rising(rates, duration_s, 0.0):
        return False, f"the goodput rose over {stretch:.1f} s"
    return True, f"RTT and goodput not rising over {stretch:.1f} s"


def settled(
    rtt_ms: list[tuple[float, float]],
    rate_bps: list[tuple[float, float]],
    *,
    now: float,
    since: float,
    duration_s: float,
    queues: QueueSeries | None = None,
) -> str | None:
    """Why the path is in steady state at ``now`` (traffic running since ``since``), or
    None while it is not or the evidence is not yet there (:func:`judged` over the
    stretch before ``now``)."""
    found = judged(rtt_ms, rate_bps, now=now, since=since, duration_s=duration_s, queues=queues)
    if found is None or not found[0]:
        return None
    return found[1].replace(" over ", " over the last ", 1)


# --- the bottleneck queue's own evidence (tunnelbench.probes.backlog) ---

#: A queue's backlog rises when it would grow by more than this (and by more than
#: :data:`TREND_PCT` of its level) over the measured duration: ten full frames, so that
#: an almost empty queue's bursts of a few aggregates are not read as a queue filling.
BACKLOG_FLOOR_BYTES = 15_140


def first_drop(readings: Sequence[QueueReading]) -> float | None:
    """When the queue was first seen to have dropped since its first reading (the time of
    the reading that shows it); None when it has not."""
    if not readings:
        return None
    base = readings[0].drops
    return next((r.at for r in readings if r.drops > base), None)


def _kb(value: float) -> str:
    return f"{value / 1000:,.0f} kB" if value >= 10_000 else f"{value / 1000:,.1f} kB"


#: The queue of a machine's TCP senders, after its role's name (``client.cwnd``): their
#: congestion windows summed, in segments (:mod:`tunnelbench.probes.senders`).
CWND = "cwnd"
#: The senders' windows grow when their rise is significant and would add more than this
#: over the measured duration (a qdisc's backlog: :data:`BACKLOG_FLOOR_BYTES` and
#: :data:`TREND_PCT` of it). A window bound by its buffers does not move by a segment
#: (two such streams through wireguard-go held 3,000 segments to the segment for 9 s),
#: while cubic's window near its last maximum grows 1-3 segments a second: in a Debian
#: guest a 700 kB FIFO at 20 Mbit/s stood at 350 kB for 1.7 s while the windows crept
#: from 286 to 290 segments, which a floor of 10 read as a standing queue, and the
#: windows went on to 325 segments over the next 2 s with the queue filling behind them.
CWND_FLOOR_SEGMENTS = 2


def is_senders(name: str) -> bool:
    """Whether the queue ``name`` (``role.link``) is a machine's TCP senders' windows,
    which a bulk sender always holds: they say when a queue still fills, never that one
    stands."""
    return name.rpartition(".")[2] == CWND


def climbing(samples: list[tuple[float, float]]) -> bool:
    """Whether the senders' windows (:func:`is_senders`) only rose over ``samples``, by
    at least :data:`CWND_FLOOR_SEGMENTS`. With nothing lost a window never falls, and a
    rise is the senders still limited by their windows: a clean signal, where a slope's
    significance is not. In a Debian guest a 700 kB FIFO's windows rose from 75 to 205
    segments over 8.6 s without one fall or one drop, yet a stretch that read 114, 117,
    117, 117, 118, 118 (one step, then a plateau) was not significant, and the FIFO's
    noisy backlog (69-106 kB) then called the path steady with 89 kB of 700 queued."""
    values = [v for _, v in samples]
    return values[-1] - values[0] >= CWND_FLOOR_SEGMENTS and all(
        b >= a for a, b in pairwise(values)
    )


def level(name: str, reading: QueueReading) -> float:
    """What a queue is judged by: a qdisc's backlog in bytes, the senders' windows in
    segments."""
    return float(reading.backlog_packets if is_senders(name) else reading.backlog_bytes)


def _floor(name: str) -> float:
    return CWND_FLOOR_SEGMENTS if is_senders(name) else BACKLOG_FLOOR_BYTES


def still_filling(name: str, over: str, first: float, last: float) -> str:
    """The words for a queue still filling ``over`` a stretch, from ``first`` to ``last``
    (its :func:`level`), with nothing dropped (or, for the senders, lost) yet."""
    if is_senders(name):
        return (
            f"the {name.rpartition('.')[0]}'s TCP senders still grew their windows {over}"
            f" ({first:,.0f} → {last:,.0f} segments, no loss yet)"
        )
    return f"the {name} queue still filled {over} ({_kb(first)} → {_kb(last)}, no drop yet)"


def queue_judged(
    queues: QueueSeries,
    *,
    now: float,
    stretch: float,
    duration_s: float,
    since: float = float("-inf"),
) -> tuple[bool | None, str] | None:
    """What the queues' own readings over the ``stretch`` seconds before ``now`` say:
    (False, why) when one still fills (its :func:`level` rises, :func:`rising`, and it
    has dropped nothing since the traffic began); (None, why) while one has not yet
    given the evidence (see below); (True, why) when one holds a standing queue (not
    empty at any reading of the stretch) that has overflowed or no longer grows (the
    senders' windows, :func:`is_senders`, are held only to the first, and where the
    WAN's queues are watched, their drops are the senders' losses); None when none
    holds one (the bottleneck is elsewhere, or nothing is queued: the round trip and
    the rate judge).

    A queue with fewer than :data:`SETTLE_SAMPLES` readings in the stretch is judged
    by its last that many since ``since``, as the round trip is (:func:`_judged`): a
    longer stretch, never a thinner one; with fewer than that since ``since`` it has
    not yet spoken, and nothing else may end the warm-up for it. An emulated guest reads
    its queues every 0.15-0.3 s: a 0.5 s stretch held 2-4 readings, the queues were
    passed over, and the round trip and rate called a 700 kB FIFO steady 0.3 s into
    the traffic, holding 90 kB of it and still filling (its windows grew from 121 to
    134 segments over the window, the round trip read 67-96 ms where the full queue
    holds 301). A series with no reading in the stretch has stopped and is not judged."""
    standing: list[str] = []
    waiting = ""
    wan = {name: found for name, found in queues.items() if not is_senders(name)}
    for name, readings in sorted(queues.items()):
        inside = [r for r in readings if now - stretch <= r.at <= now]
        if not inside:
            continue
        if len(inside) < SETTLE_SAMPLES:
            inside = [r for r in readings if since <= r.at <= now][-SETTLE_SAMPLES:]
            if len(inside) < SETTLE_SAMPLES:
                waiting = waiting or name
                continue
        series = [(r.at, level(name, r)) for r in inside]
        dropped = inside[-1].drops - readings[0].drops
        senders = is_senders(name)
        if senders and wan:
            # Where the WAN's queues are watched, a loss cycle is one of them dropping:
            # the senders' own recoveries also count a retransmission timeout that a
            # stalled emulated guest fired with nothing lost (seen: 3 at the start of a
            # trial whose 700 kB FIFO never dropped, then windows regrowing 7 segments
            # a second towards it).
            dropped = sum(found[-1].drops - found[0].drops for found in wan.values() if found)
        # Windows grow only while the senders are limited by them (tcp_is_cwnd_limited):
        # with nothing lost, any growth puts more in flight at the bottleneck's fixed
        # rate, so however slowly a queue fills, it fills. cubic after leaving slow
        # start grows ~0.5 segment a round trip at first: 5 % in 3 s of a 200-segment
        # window, under the 10 % asked of a noisy backlog.
        grows = rising(series, duration_s, _floor(name), relative=not senders)
        if not dropped and (grows or (senders and climbing(series))):
            return False, still_filling(name, f"over {stretch:.1f} s", series[0][1], series[-1][1])
        if not senders and all(r.backlog_bytes > 0 for r in inside):
            held = sum(v for _, v in series) / len(series)
            standing.append(
                f"the {name} queue overflowed ({dropped:,} drops), holding {_kb(held)}"
                if dropped
                else f"the {name} queue held {_kb(held)}, not growing, over {stretch:.1f} s"
            )
    if waiting:
        return None, f"the {waiting} queue gave fewer than {SETTLE_SAMPLES} readings yet"
    return (True, "; ".join(standing)) if standing else None


@dataclass(frozen=True)
class QueueWindow:
    """One queue over the measured window: its mean :func:`level` over the window's first
    and last third, whether it held a standing queue throughout (the bottleneck's), and
    whether it was still filling: its backlog rose (:func:`rising`) over the part of the
    window before its first drop since the traffic began, and its last third held at
    least :data:`RTT_RISE_PCT` more than its first (as a round trip must rise to be
    flagged). Four senders' queue on this machine's 1 Gbit/s link, bounded by their
    sockets at 11-14 aggregates, stepped once from 749 to 886 kB (1 ms at the link's
    rate) and stayed there: a significant slope, 21% more in the last third than in
    the first, no drop, and no queue filling."""

    first: float  # its level (:func:`level`)
    last: float
    standing: bool
    filling: bool


def queue_window(
    name: str, readings: Sequence[QueueReading], window: tuple[float, float], duration_s: float
) -> QueueWindow | None:
    """The :class:`QueueWindow` of the queue ``name``; None with fewer than three
    readings in it."""
    begin, end = window
    inside = [r for r in readings if begin <= r.at <= end]
    pair = thirds([level(name, r) for r in inside])
    if pair is None:
        return None
    dropped_at = first_drop(readings)
    before = [(r.at, level(name, r)) for r in inside if dropped_at is None or r.at <= dropped_at]
    floor = _floor(name)
    filling = (
        len(before) >= SETTLE_SAMPLES
        and rising(before, duration_s, floor)
        and pair[1] - pair[0] >= max(pair[0] * RTT_RISE_PCT / 100, floor)
    )
    standing = not is_senders(name) and all(r.backlog_bytes > 0 for r in inside)
    return QueueWindow(pair[0], pair[1], standing, filling)
