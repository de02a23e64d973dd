"""Advice about the WAN queue: which queue dropped, and what to do about that queue.

Drops are advised on where they happened (:mod:`tunnelbench.analysis.drop_sites`): the
WAN queue's discipline and limit are plan settings; the tunnel device's own queue
overflows because its reader is slower than the traffic, which no WAN setting changes.
A larger WAN queue is advised from what the flows need of it (the bandwidth-delay
product over the square root of the flows, four segments a flow:
:mod:`tunnelbench.analysis.queue_size`), from what the queue did (its drops are the
verdict and it held the link well below its ceiling: too small, whatever the arithmetic
says), or from this run's own measurement of a larger one that was significantly faster.

Advice across a run's rows must not contradict itself: a larger queue is advised only
where the drops hold the link below its ceiling, a shorter one only where the link is at
its ceiling and the queue's measured standing delay is large (the latency finding), and
never down to a limit this run measured slower (a tiny FIFO's row was told "raise the
queue to 72: +8%" while the 72 row was told to shorten it to 18).
"""

from collections.abc import Callable
from typing import Any

from tunnelbench.analysis import drop_sites
from tunnelbench.analysis.diagnosis import Bound, Finding
from tunnelbench.analysis.queue_size import senders_bound_bytes, wan_queue
from tunnelbench.analysis.suggestion import Advice, Availability, Context, Measured
from tunnelbench.analysis.verdicts import link_bound_pct, share_of_ceiling
from tunnelbench.kinds import Queue
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import QUEUE_LIMIT_MAX
from tunnelbench.units import human_rate

FIFOS = (None, Queue.PFIFO.value, Queue.PFIFO_FAST.value)
FAIR_QUEUES = (Queue.FQ_CODEL.value, Queue.CAKE.value, Queue.FQ.value)
# The fair queues the advice names, in order of preference.
ADVISED_QUEUES = (Queue.FQ_CODEL.value, Queue.CAKE.value)
QUEUE_LIMIT_MIN = 2  # packets: the shortest queue advice proposes
#: A larger queue measured faster by less than this (%) is no reason to advise one: a
#: link-bound FIFO measured +0% (p = 0.0079) for a limit 16 times its own. The same as
#: ``tunnelbench tune``'s default minimum gain.
QUEUE_GAIN_PCT = 2.0
#: A WAN FIFO whose drops are the verdict, that dropped at least this share (%) of what it
#: was offered while the link ran below its link-bound share of the ceiling, is too
#: small whatever the bandwidth-delay arithmetic says: over a sub-millisecond round trip
#: the product is a few packets, while the senders' bursts (GSO aggregates, a window
#: released at once) are not. wireguard-go through a 3-packet FIFO at 100 Mbit/s, one
#: flow: 49% dropped, 60% of the ceiling; 48 packets gave +82% (p = 0.0079).
STARVED_DROP_PCT = 1.0
#: What a starved queue's limit is multiplied by for the values to measure.
STARVED_FACTORS = (4, 16)


def _at_ceiling(c: Context) -> bool | None:
    """Whether the configuration reached its link's ceiling (the link-bound share,
    :func:`~tunnelbench.analysis.verdicts.link_bound_pct`); None without a ceiling."""
    pct = share_of_ceiling(c.subject)
    return None if pct is None else pct >= link_bound_pct(c.subject)


def _site(c: Context, finding: Finding) -> drop_sites.DropSite | None:
    """The place a queue-drop finding names (its subject)."""
    found = drop_sites.sites(c.subject.metrics)
    return next((site for site in found if site.name == finding.subject), None)


def _wan_dropped(c: Context) -> bool | None:
    """Whether the WAN queue dropped packets in any run; None when no run recorded its
    counters (runs stored before the qdisc and link probes)."""
    counted = [
        found
        for run in c.subject.runs or (c.subject.metrics,)
        if (found := drop_sites.dropped(run, "wan")) is not None
    ]
    return any(d > 0 for d in counted) if counted else None


def _queue_loss(c: Context) -> Finding | None:
    """The finding that says the WAN queue lost packets: its drops (the queue-drop
    finding when it names the WAN), or a lossy link-bound verdict whose runs' WAN queue
    dropped packets (or whose runs predate the drop counters). None for drops elsewhere
    (the tunnel device's queue: :func:`tunnel_queue`), and when the queue is below one
    bandwidth-delay product, which :func:`queue_for_bdp` advises on (a fair queue does
    not let one flow fill the link, and the limit it needs is known)."""
    if c.finding(Bound.QUEUE_BELOW_BDP) is not None:
        return None
    drops = c.finding(Bound.QUEUE_DROPS)
    if drops is not None and (site := _site(c, drops)) is not None and site.where == "wan":
        return drops
    lossy = c.finding(Bound.LINK_LOSSY)
    if lossy is not None and _wan_dropped(c) is not False:
        return lossy
    return None


def tunnel_queue(c: Context) -> Advice | None:
    """Drops at the tunnel device's own queue: the kernel filled it faster than its
    reader emptied it. For a userspace tunnel the reader is the daemon, so the cure is
    the daemon's speed; a longer queue only delays the same drops while the daemon is
    slower than the traffic, and no WAN setting reaches it."""
    drops = c.finding(Bound.QUEUE_DROPS)
    if drops is None or (site := _site(c, drops)) is None or site.where != "tunnel":
        return None
    resolved = c.subject.resolved
    if resolved.tunnel is not None and resolved.tunnel.userspace:
        daemon = resolved.setup.implementation or "the tunnel's daemon"
        suggestion = (
            f"speed up {daemon}, not the WAN queue: it did not read the tunnel device as"
            " fast as the kernel filled it (a faster implementation, or more CPU for it; a"
            " longer tunnel device queue, txqueuelen, only delays the same drops)"
        )
    else:
        suggestion = (
            "look at the tunnel device, not the WAN queue: the packets were dropped in the"
            " tunnel device's own queue"
        )
    return Advice(None, suggestion, drops.summary)


def fair_queue(c: Context) -> Advice | None:
    finding = _queue_loss(c) or c.finding(Bound.LATENCY)
    queue = c.subject.config.lab.wan.queue
    if finding is None or (queue.value if queue else None) not in FIFOS:
        return None
    if c.subject.config.lab.wan.rate is None:
        return None
    found = [c.available("qdiscs", q, q) for q in ADVISED_QUEUES]
    usable = [a.what for a in found if a.state == "yes"]
    if usable:
        can = Availability(" or ".join(usable), "yes")
    elif all(a.state == "no" for a in found):
        refusals = "; ".join(f"{a.what}: {a.detail}" for a in found)
        can = Availability("fq_codel and cake", "no", refusals)
    else:  # not recorded, or not probed: with the reason
        unknown = next(a for a in found if a.state != "no")
        can = Availability("fq_codel and cake", unknown.state, unknown.detail)
    queues = " or ".join(usable or ADVISED_QUEUES)
    return Advice(
        "lab.wan.queue",
        f"replace the FIFO with a fair, delay-managing queue ({queues})",
        finding.summary,
        c.measured("lab.wan.queue", lambda v: v in FAIR_QUEUES),
        can,
        ADVISED_QUEUES,
        goal="both",
    )


def larger_queue(c: Context) -> Advice | None:
    """A WAN FIFO that dropped packets and holds less than its flows need
    (:mod:`tunnelbench.analysis.queue_size`: the bandwidth-delay product over the square
    root of the flows, four segments a flow); or whose drops are the verdict while it held
    the link well below its ceiling (:func:`_starved`); or whose larger limit this run
    measured significantly faster. Nothing else: a queue that holds what its flows need
    and keeps the link at its ceiling drops because loss-based TCP fills any queue, and a
    larger one only adds delay (a 50-packet FIFO at 1.5 products and 98.8% of the ceiling:
    +0% for 1000). Not fq_codel's or cake's drops either: they drop by design, to keep
    each flow's wait short, long before their limit (in a Debian-kernel guest at 20
    Mbit/s and a 20 ms round trip, 32-38 retransmits a run with 1000 packets allowed), so
    a higher limit changes nothing."""
    finding = _queue_loss(c)
    s = c.subject
    wan = s.config.lab.wan
    queue = wan_queue(s.config, s.metrics)
    if finding is None or queue is None or c.finding(Bound.LATENCY) is not None:
        return None
    if _at_ceiling(c):
        return None  # the drops cost nothing a larger queue could give back
    gain = _smallest_gain(c, wan.queue_limit)
    measured = gain or c.measured("lab.wan.queue_limit", lambda v: v > wan.queue_limit)
    held = (
        f"{wan.queue_limit:,} packets ({queue.held_bytes / 1000:,.1f} kB, {queue.per_packet_text})"
    )
    if queue.short:
        packets = min(queue.packets_for(queue.need_bytes), QUEUE_LIMIT_MAX)
        flows = f"{queue.flows} flow{'s' if queue.flows > 1 else ''}"
        return Advice(
            "lab.wan.queue_limit",
            f"raise the queue to {packets:,} packets: {held} hold less than {flows} need,"
            f" {queue.need_bytes / 1000:,.1f} kB ({queue.need_reason})",
            finding.summary,
            measured,
            candidates=tuple(
                v
                for v in sorted({min(packets * f, QUEUE_LIMIT_MAX) for f in (1, 4)})
                if v > wan.queue_limit
            ),
        )
    if gain is not None:
        return Advice(
            "lab.wan.queue_limit",
            f"raise the queue limit: this run measured {gain.value:,} packets faster"
            f" ({gain.change_pct:+.0f}%), though {held} hold what its flows need"
            f" ({queue.need_bytes / 1000:,.1f} kB)",
            finding.summary,
            gain,
            candidates=(gain.value,),
        )
    starved = _starved(c, finding)
    limits = tuple(
        v
        for v in sorted({min(wan.queue_limit * f, QUEUE_LIMIT_MAX) for f in STARVED_FACTORS})
        if v > wan.queue_limit
    )
    # A larger limit this run measured and found no faster (by the gain a change must
    # give) refutes it: advising it anyway would contradict the run's own row.
    if starved is None or not limits or measured is not None:
        return None
    dropped, ceiling = starved
    return Advice(
        "lab.wan.queue_limit",
        f"raise the queue to {limits[0]:,} packets or more: it dropped {dropped:.0f}% of"
        f" what it was offered and the link ran at {ceiling:.0f}% of its ceiling, though"
        f" {held} hold what the arithmetic says its flows need"
        f" ({queue.need_bytes / 1000:,.1f} kB: {queue.need_reason}); the senders' bursts"
        " are larger than that",
        finding.summary,
        measured,
        candidates=limits,
    )


def _starved(c: Context, finding: Finding) -> tuple[float, float] | None:
    """Whether a WAN FIFO that holds what the arithmetic says its flows need is too small
    all the same, by what it did: its drops are the verdict (no core, no link limit came
    first), it dropped at least :data:`STARVED_DROP_PCT` of what it was offered, and the
    link ran below its link-bound share of its ceiling
    (:func:`~tunnelbench.analysis.verdicts.link_bound_pct`). The WAN queue's drop share (%)
    and the share of the ceiling (%) when it is; None otherwise (the measured gain then
    decides, and a refuted one proposes nothing)."""
    if finding != c.diagnosis.verdict or finding.bound is not Bound.QUEUE_DROPS:
        return None
    ceiling = share_of_ceiling(c.subject)
    if ceiling is None or ceiling >= link_bound_pct(c.subject):
        return None
    site = _site(c, finding)
    if site is None or site.share_pct < STARVED_DROP_PCT:
        return None
    return site.share_pct, ceiling


def queue_for_bdp(c: Context) -> Advice | None:
    """A drop-tail queue below one bandwidth-delay product starves one TCP flow: a queue
    of one product (and twice it, for a margin) is what to measure, in packets of the
    size the queue was handed. Several flows need less each, so that is named too."""
    finding = c.finding(Bound.QUEUE_BELOW_BDP)
    s = c.subject
    wan = s.config.lab.wan
    queue = wan_queue(s.config, s.metrics)
    if finding is None or queue is None:
        return None
    packets = queue.packets_for(queue.bdp)
    size = (
        "of full size"
        if queue.packet_bytes <= queue.frame
        else f"of {queue.packet_bytes:,.0f} bytes, as measured"
    )
    candidates = sorted({min(packets * f, QUEUE_LIMIT_MAX) for f in (1, 2)} - {wan.queue_limit})
    return Advice(
        "lab.wan.queue_limit",
        f"give the bottleneck queue at least one bandwidth-delay product ({packets:,} packets"
        f" {size}), or carry the traffic in several flows",
        finding.summary,
        c.measured("lab.wan.queue_limit", lambda v: v > wan.queue_limit),
        candidates=tuple(v for v in candidates if v > wan.queue_limit),
    )


def _equal(value: int) -> Callable[[Any], bool]:
    return lambda v: bool(v == value)


def _gain(measured: Measured | None) -> bool:
    """A measured gain worth a change: significant, beyond the noise, and at least
    :data:`QUEUE_GAIN_PCT`."""
    return (
        measured is not None
        and measured.outcome == "gain"
        and not measured.in_noise
        and measured.change_pct >= QUEUE_GAIN_PCT
    )


def _smallest_gain(c: Context, limit: int) -> Measured | None:
    """Of the larger limits this run measured faster (:func:`_gain`), the smallest that
    reached the link's ceiling, else the fastest: a raise to 1,024 packets where 64
    already reached the ceiling would contradict the 1,024 row's advice to shorten."""
    gains = []
    for value in sorted(
        {s.config.lab.wan.queue_limit for s in c.run if s.config.lab.wan.queue_limit > limit}
    ):
        measured = c.measured("lab.wan.queue_limit", _equal(value))
        if measured is not None and _gain(measured):
            gains.append(measured)
    ceiling = c.subject.ceiling_bps
    if ceiling:
        floor = link_bound_pct(c.subject) / 100 * ceiling
        reached = [m for m in gains if m.goodput_bps >= floor]
        if reached:
            return reached[0]
    return max(gains, key=lambda m: m.change_pct, default=None)


def _measured_slower(c: Context, limit: int) -> int | None:
    """The largest limit below ``limit`` this run measured significantly slower than this
    configuration; None when it measured none."""
    slower = None
    for sibling in c.run:
        value = sibling.config.lab.wan.queue_limit
        if value >= limit or (slower is not None and value <= slower):
            continue
        measured = c.measured("lab.wan.queue_limit", _equal(value))
        if (
            measured is not None
            and measured.outcome == "slower"
            and measured.change_pct <= -QUEUE_GAIN_PCT
        ):
            slower = value
    return slower


def _standing_ms(c: Context) -> float | None:
    """What the load added to the median round trip: the queue's measured standing
    delay (ms); None when the round trips were not recorded."""
    idle = c.subject.metrics.get(metric.RTT_IDLE.name)
    loaded = c.subject.metrics.get(metric.RTT_LOADED.name)
    return None if idle is None or loaded is None else loaded - idle


def shorter_queue(c: Context) -> Advice | None:
    """A FIFO whose packets waited long (the latency finding: the measured standing delay
    is large) while the link was at its ceiling: a shorter one bounds the delay. Below
    the ceiling a shorter queue would cost goodput the link has room for, and a limit this
    run measured slower is not proposed (the measurement decides; a goodput comparison
    cannot judge the delay, so none is cited).

    The wait it states is what the queue can hold, limit times the bytes a packet held
    over the rate, bounded by what the senders can have queued at all: their socket
    buffers (:func:`~tunnelbench.analysis.queue_size.senders_bound_bytes`; a
    1000-aggregate FIFO "waited up to 15,357 ms" where the buffers bound it near 1.7 s),
    and beside it the wait this run measured."""
    latency = c.finding(Bound.LATENCY)
    wan = c.subject.config.lab.wan
    if latency is None or wan.rate is None or (wan.queue.value if wan.queue else None) not in FIFOS:
        return None
    if _at_ceiling(c) is False:
        return None
    limit = wan.queue_limit
    shorter = {max(limit // f, QUEUE_LIMIT_MIN) for f in (4, 16)} - {limit}
    floor = _measured_slower(c, limit)
    if floor is not None:
        shorter = {v for v in shorter if v > floor}
    if not shorter:
        return None
    # What each queued packet held: GSO/GRO aggregates where the trial measured them.
    queue = wan_queue(c.subject.config, c.subject.metrics)
    if queue is not None and queue.packet_bytes > queue.frame:
        size, each = f"of {queue.packet_bytes:,.0f} bytes (measured)", queue.packet_bytes
    else:
        size, each = f"of up to {wan.mtu} bytes", float(wan.mtu)
    held_ms = limit * each * 8 / wan.rate * 1000
    senders = senders_bound_bytes(c.subject.config)
    senders_ms = senders * 8 / wan.rate * 1000
    if senders_ms < held_ms:
        streams = c.subject.config.traffic.streams
        wait = (
            f"{limit} packets {size} could hold {held_ms:,.0f} ms at {human_rate(wan.rate)},"
            f" but the senders' socket buffers ({streams} stream{'s' if streams > 1 else ''}"
            f" x {senders / streams / 2**20:g} MiB, Linux's default tcp_wmem maximum) bound"
            f" the wait to {senders_ms:,.0f} ms"
        )
    else:
        wait = f"{limit} packets {size} wait up to {held_ms:,.0f} ms at {human_rate(wan.rate)}"
    measured = _standing_ms(c)
    seen = "" if measured is None else f"; measured here: {measured:,.0f} ms of waiting"
    return Advice(
        "lab.wan.queue_limit",
        f"shorten the queue: {wait}{seen}",
        latency.summary,
        candidates=tuple(sorted(shorter, reverse=True)),
        goal="latency",
    )
