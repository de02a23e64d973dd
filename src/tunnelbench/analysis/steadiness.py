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

from tunnelbench.model import metrics as metric

#: The round trip's rise over the window that marks a queue still filling: % and ms.
RTT_RISE_PCT = 25.0
RTT_RISE_MS = 1.0
#: The goodput's rise over the window that marks a sender still ramping up.
GOODPUT_RISE_PCT = 15.0


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


def unsteady(metrics: dict[str, float]) -> tuple[str, ...]:
    """What still moved across one trial's measured window, in words; empty when it was
    in steady state (or the trial was recorded before these metrics were)."""
    found = []
    first, last = metrics.get(metric.RTT_FIRST.name), metrics.get(metric.RTT_LAST.name)
    if first is not None and last is not None:
        rise = last - first
        if rise >= RTT_RISE_MS and rise >= first * RTT_RISE_PCT / 100:
            found.append(
                f"not steady: loaded RTT rose {first:,.1f} → {last:,.1f} ms across the window"
                " (a queue still filling; lengthen traffic.warmup)"
            )
    first, last = metrics.get(metric.GOODPUT_FIRST.name), metrics.get(metric.GOODPUT_LAST.name)
    if first is not None and last is not None and first > 0:
        rise_pct = 100 * (last - first) / first
        if rise_pct >= GOODPUT_RISE_PCT:
            found.append(
                f"not steady: goodput rose {rise_pct:.0f}% across the window"
                f" ({first / 1e6:,.1f} → {last / 1e6:,.1f} Mbit/s; lengthen traffic.warmup)"
            )
    return tuple(found)
