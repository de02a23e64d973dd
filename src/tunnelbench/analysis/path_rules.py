"""What the network path says: goodput at (or above) the shaped link's ceiling, a queue
that holds less than one bandwidth-delay product, the place that dropped packets, and
packets that waited in a queue (bufferbloat), or a queue so full that it dropped the
round-trip probe's own pings.

A median hides what varies between runs, so the link-bound verdict reads every run
(:attr:`Subject.runs`): it weighs the queue's drops, TCP's retransmits and the spread of
the runs (a run below 95% of the ceiling with loss in the runs is ``link-bound-lossy``).
"""

import math
import statistics

from tunnelbench.analysis import drop_sites
from tunnelbench.analysis.loss_rules import (
    RETRANSMIT_HEAVY_PCT,
    reordered,
    retransmit_share,
    retransmit_source,
)
from tunnelbench.analysis.queue_size import PACKET_FIFOS, wan_packet_bytes, wan_queue
from tunnelbench.analysis.verdicts import (
    LINK_BOUND_PCT,
    Bound,
    Evidence,
    Finding,
    Subject,
    above_ceiling_pct,
    link_bound_pct,
    mbit,
    share_of_ceiling,
)
from tunnelbench.kinds import Direction, Protocol, Queue, Topology
from tunnelbench.model import metrics as metric
from tunnelbench.model.metrics import RTT_LOADED_P95
from tunnelbench.model.wan import queue_bytes
from tunnelbench.units import human_rate

QUEUE_DROP_SHARE_PCT = 0.1  # drops per packet offered to a qdisc or link
BLOAT_EXTRA_MS = 30.0  # RTT under load above idle RTT by at least this much...
BLOAT_FACTOR = 2.0  # ...and at least this many times the idle RTT
#: Pings a window must lose, and their share of the window's pings, for the probe's loss
#: to be a finding (one or two lost pings are any path's noise).
PROBE_LOST_MIN, PROBE_LOST_SHARE = 3, 0.5
#: Round trips under load a measured window must span for the receivers' count to be
#: what the link carried in it: a lost segment is repaired a round trip later, the
#: receiver holds what came after it until then and hands it over at once, so either edge
#: of the window can move up to a round trip of data in or out of it.
WINDOW_ROUND_TRIPS = 10
#: The share of a FIFO's capacity under which a queue that never dropped did not fill.
UNFILLED_SHARE = 0.5


def above_ceiling(s: Subject) -> Finding | None:
    """More than the link can carry: the shaper or the measurement is wrong, and every
    other conclusion about this configuration would rest on a false number."""
    pct = share_of_ceiling(s)
    if pct is None or pct <= above_ceiling_pct(s.config):
        return None
    summary = (
        f"{pct:.1f}% of the link's ceiling ({mbit(s.goodput_bps):,.1f} of"
        f" {mbit(s.ceiling_bps or 0):,.1f} Mbit/s): more than the link can carry, so the"
        " shaping or the measurement is in doubt"
    )
    evidence = [
        Evidence("goodput", mbit(s.goodput_bps), "Mbit/s"),
        Evidence("ceiling", mbit(s.ceiling_bps or 0), "Mbit/s"),
        Evidence("share of ceiling", pct, "%"),
    ]
    window = s.config.traffic.duration
    rtt_ms = s.metrics.get(RTT_LOADED_P95.name)
    if rtt_ms and (trips := window * 1000 / rtt_ms) < WINDOW_ROUND_TRIPS:
        # Seen: 8 streams through a 600 ms FIFO at 3 Mbit/s read 108-113% over 3 s, the
        # server's 0.1 s reports ranging from 0 to 172 kB (13.8 Mbit/s).
        summary += (
            f"; the measurement: its window ({window:g} s) spans only {trips:.1f} round"
            f" trips under load ({rtt_ms:,.0f} ms), and a receiver hands over what it held"
            " behind a lost segment a round trip later, at once, so the window counted data"
            f" the link carried before it; measure for {WINDOW_ROUND_TRIPS} round trips or"
            f" more (`traffic.duration` ≥ {math.ceil(WINDOW_ROUND_TRIPS * rtt_ms / 1000)})"
        )
        evidence.append(Evidence("round trips in the window", trips, ""))
    return Finding(Bound.ABOVE_CEILING, summary, tuple(evidence), subject="measurement")


def _drops(metrics: dict[str, float]) -> float | None:
    """Packets dropped in one run by every qdisc and interface the probes read; None when
    none was read."""
    names = [
        n
        for n in metrics
        if ((device := metric.parse_device(n, "qdisc")) and device[1] == "drops")
        or ((device := metric.parse_device(n, "link")) and device[1].endswith("_dropped"))
    ]
    return sum(metrics[n] for n in names) if names else None


def _per_run(values: list[float]) -> str:
    """``87``, or ``87 (4-177)``: the median, and the range when the runs differ."""
    median = f"{statistics.median(values):,.0f}"
    if min(values) == max(values):
        return median
    return f"{median} ({min(values):,.0f}-{max(values):,.0f})"


def link_bound(s: Subject) -> Finding | None:
    """At the shaped link's limit, weighing what the median hides: the queue's drops,
    TCP's retransmits and the spread of the runs. When the slowest run fell below
    :data:`LINK_BOUND_PCT` of the ceiling while packets were lost, or the senders
    retransmitted :data:`RETRANSMIT_HEAVY_PCT` of their segments, the verdict is
    ``link-bound-lossy``: the link is the limit, but the queue costs throughput. (For
    BBR the share is lower by its drain round trip: :func:`link_bound_pct`.)"""
    pct, floor = share_of_ceiling(s), link_bound_pct(s)
    if pct is None or not floor <= pct <= above_ceiling_pct(s.config):
        return None
    ceiling = s.ceiling_bps or 0.0
    evidence = [
        Evidence("goodput", mbit(s.goodput_bps), "Mbit/s"),
        Evidence("ceiling", mbit(ceiling), "Mbit/s"),
        Evidence("share of ceiling", pct, "%"),
    ]
    clauses = []
    lost = False
    drops = [d for d in (_drops(run) for run in s.runs or (s.metrics,)) if d is not None]
    if drops:
        median_drops = statistics.median(drops)
        evidence.append(Evidence("queue and interface drops per run", median_drops, "packets"))
        lost = lost or max(drops) > 0
        if max(drops) > 0:
            clauses.append(f"the queues dropped {_per_run(drops)} packets per run")
    source = retransmit_source(s)
    retrans_share = None
    if source is not None:
        name, said = source
        retrans = s.per_run(name)
        median_retrans = statistics.median(retrans)
        evidence.append(Evidence(f"TCP retransmits per run ({said})", median_retrans, ""))
        lost = lost or max(retrans) > 0
        if max(retrans) > 0:
            clauses.append(f"TCP retransmitted {_per_run(retrans)} segments per run ({said})")
        retrans_share = retransmit_share(s)
        if retrans_share is not None:
            evidence.append(Evidence("retransmit share", retrans_share[0], "%"))
    shares = [100.0 * g / ceiling for g in s.per_run(metric.GOODPUT.name)] if ceiling > 0 else []
    if len(shares) > 1:
        evidence += [
            Evidence("slowest run, share of ceiling", min(shares), "%"),
            Evidence("fastest run, share of ceiling", max(shares), "%"),
        ]
        clauses.append(f"runs span {min(shares):.1f}-{max(shares):.1f}% of the ceiling")
    slow_run = bool(shares) and min(shares) < floor
    # Segments retransmitted because they arrived late are no loss the queue caused.
    late = reordered(s)
    if late is not None:
        where = "" if late.every_run else f" in {late.runs} of {late.of} runs"
        clauses.append(f"TCP counted {late.events:,.0f} reorder events with no packet lost{where}")
    heavy = (
        retrans_share is not None
        and retrans_share[0] >= RETRANSMIT_HEAVY_PCT
        and (late is None or not late.every_run)
    )
    head = (
        f"at {pct:.1f}% of the link's ceiling ({mbit(s.goodput_bps):,.1f} of"
        f" {mbit(ceiling):,.1f} Mbit/s)"
    )
    if (lost and slow_run) or heavy:
        cost = []
        if slow_run:
            cost.append(f"the slowest run reached only {min(shares):.1f}%")
        if heavy and retrans_share is not None:
            cost.append(f"{retrans_share[0]:.2f}% of the segments sent were retransmitted")
        return Finding(
            Bound.LINK_LOSSY,
            f"{head}: the shaped link is the limit, but loss costs throughput:"
            f" {' and '.join(cost)}; {'; '.join(clauses)}",
            tuple(evidence),
            subject="WAN link",
        )
    tail = f"; {'; '.join(clauses)}" if clauses else ""
    return Finding(
        Bound.LINK,
        f"{head}: the shaped link is the limit{tail}",
        tuple(evidence),
        subject="WAN link",
    )


#: Drop-tail queues, whose limit is all the buffer a flow gets (fair and delay-managing
#: queues keep their own much shorter standing queue, so a larger limit does not help).
DROP_TAIL = PACKET_FIFOS


def queue_below_bdp(s: Subject) -> Finding | None:
    """One TCP flow needs the bottleneck to buffer a bandwidth-delay product: a
    loss-based sender shrinks its window at a drop (Reno to half, cubic to 0.7), and the
    queue must keep the link busy while the window grows back. With less, the link idles
    after every drop.

    Judged only where the configuration sets the delay (``lab.wan.delay``; unimpaired,
    the lab's round trip is a fraction of a millisecond and the product a few packets),
    on a shaped link with a drop-tail queue, for one TCP stream, and only when the
    trial's own figures show the shortfall: goodput below :data:`LINK_BOUND_PCT` of the
    ceiling while the WAN queue dropped packets. The round trip is the idle one measured
    (it includes the delay both ways), or twice the delay when it was not recorded. The
    queue holds its limit in packets of the size its device was handed in the trial
    (GSO/GRO aggregates where the lab keeps offloads on), or full frames where the size
    was not recorded (:mod:`tunnelbench.analysis.queue_size`).
    """
    wan, traffic = s.config.lab.wan, s.config.traffic
    queue = wan_queue(s.config, s.metrics)
    if not wan.delay or wan.rate is None or queue is None:
        return None
    if traffic.protocol is not Protocol.TCP or traffic.streams != 1:
        return None
    pct = share_of_ceiling(s)
    drops = sum(s.metrics[n] for n in metric.device_names(s.metrics, "qdisc", "drops", link="wan"))
    if pct is None or pct >= LINK_BOUND_PCT or drops <= 0:
        return None
    held, bdp = queue.held_bytes, queue.bdp
    if held >= bdp:
        return None
    packets = (
        f"{wan.queue_limit:,} packets"
        if queue.measured is None or queue.measured <= queue.frame
        else f"{wan.queue_limit:,} packets of {queue.packet_bytes:,.0f} bytes, measured,"
    )
    return Finding(
        Bound.QUEUE_BELOW_BDP,
        f"the bottleneck queue ({packets} = {held / 1000:,.1f} kB) holds"
        f" less than one bandwidth-delay product ({bdp / 1000:,.1f} kB at"
        f" {human_rate(wan.rate)} and RTT {queue.rtt_s * 1000:,.1f} ms); one TCP flow"
        f" cannot keep the link full: {pct:.1f}% of the ceiling, and the WAN queue dropped"
        f" {drops:,.0f} packets",
        (
            Evidence("queue", held, "bytes"),
            Evidence("bandwidth-delay product", bdp, "bytes"),
            Evidence("round trip", queue.rtt_s * 1000, "ms"),
            Evidence("share of ceiling", pct, "%"),
            Evidence("WAN queue drops", drops, "packets"),
            Evidence("full-sized frame", queue.frame, "bytes"),
            Evidence(*queue.evidence()[1]),
        ),
        subject="WAN queue",
    )


def _echo(s: Subject, site: drop_sites.DropSite) -> bool:
    """Whether a drop counter only counts again what another one dropped: a kernel
    tunnel's device has no queue of its own, and its transmit drops are the packets the
    queue under it refused (a VXLAN device over a full WAN FIFO counted 139 where the
    FIFO counted 225, a larger share of what it sent). A userspace tunnel's TUN device has
    a queue its daemon empties; its drops are its own."""
    tunnel = s.resolved.tunnel
    kernel = tunnel is not None and not tunnel.userspace
    return kernel and site.where == "tunnel" and site.counter == "tx"


def queue_drops(s: Subject) -> Finding | None:
    """The place that dropped the largest share of what it was offered, when that is at
    least :data:`QUEUE_DROP_SHARE_PCT`: the WAN queue under test, the tunnel device's own
    queue (a userspace daemon that does not read its TUN device as fast as the kernel
    fills it), or another device (:mod:`tunnelbench.analysis.drop_sites`)."""
    worst = max(
        (site for site in drop_sites.sites(s.metrics) if site.drops > 0 and not _echo(s, site)),
        key=lambda site: site.share_pct,
        default=None,
    )
    if worst is None or worst.share_pct < QUEUE_DROP_SHARE_PCT:
        return None
    share, drops = worst.share_pct, worst.drops
    evidence = [
        Evidence(f"drops at {worst.name}", drops, "packets"),
        Evidence("drop share", share, "%"),
    ]
    head = f"the {worst.name} dropped {drops:,.0f} packets ({share:.2f}% of those offered)"
    if worst.where == "tunnel":
        wan = drop_sites.dropped(s.metrics, "wan")
        reader = ""
        if s.resolved.tunnel is not None and s.resolved.tunnel.userspace:
            reader = f": {s.resolved.setup.implementation}, which reads it, did not keep up"
        head = (
            f"the tunnel device's own queue ({worst.name}) dropped {drops:,.0f} packets"
            f" ({share:.2f}% of those offered){reader}"
        )
        if wan is not None:
            evidence.append(Evidence("WAN queue drops", wan, "packets"))
            head += f"; the WAN dropped {wan:,.0f}"
    source = retransmit_source(s)
    tail = ""
    if source is not None:
        retransmits = s.metrics[source[0]]
        evidence.append(Evidence(f"TCP retransmits ({source[1]})", retransmits, ""))
        tail = f", and TCP retransmitted {retransmits:,.0f} segments ({source[1]})"
    return Finding(Bound.QUEUE_DROPS, f"{head}{tail}", tuple(evidence), subject=worst.name)


def latency_under_load(s: Subject) -> Finding | None:
    idle = s.metrics.get(metric.RTT_IDLE.name)
    loaded = s.metrics.get(metric.RTT_LOADED.name)
    if (lost := probe_lost(s)) is not None:
        return lost
    if idle is None or loaded is None:
        return None
    extra = loaded - idle
    if extra < BLOAT_EXTRA_MS or loaded < BLOAT_FACTOR * idle:
        return None
    evidence = [Evidence("idle RTT", idle, "ms"), Evidence("RTT under load", loaded, "ms")]
    if (p95 := s.metrics.get(metric.RTT_LOADED_P95.name)) is not None:
        evidence.append(Evidence("RTT under load p95", p95, "ms"))
    own = senders_own_fifo(s)
    return Finding(
        Bound.LATENCY,
        f"latency under load {loaded:.1f} ms against {idle:.2f} ms idle (+{extra:.1f} ms):"
        f" packets wait in a queue (bufferbloat){own[0] if own else ''}",
        (*evidence, *(own[1] if own else ())),
    )


def senders_own_fifo(s: Subject) -> tuple[str, tuple[Evidence, ...]] | None:
    """Why a FIFO under test held only a fraction of its capacity, where the senders'
    own kernel is what holds it: in ``road-warrior`` the upload's WAN queue is the
    client's egress, in the sender's own host, where TCP Small Queues lets each socket
    keep only about two aggregates queued (or a millisecond at its pacing rate). A 700
    kB FIFO at 20 Mbit/s held 120 kB there, with no drop, where on a router's egress
    (site-to-site) it overflowed and held 573-631 kB. None where the queue is a
    router's, or dropped, or filled past :data:`UNFILLED_SHARE` of its capacity."""
    lab, wan = s.config.lab, s.config.lab.wan
    if (
        lab.topology is not Topology.ROAD_WARRIOR
        or s.config.traffic.direction is Direction.DOWNLOAD
        or s.config.traffic.protocol is not Protocol.TCP
        or wan.rate is None
        or (wan.queue not in PACKET_FIFOS and wan.queue is not Queue.BFIFO)
    ):
        return None
    held = s.metrics.get(metric.qdisc("client", "wan", "window_last_bytes"))
    drops = s.metrics.get(metric.qdisc("client", "wan", "drops"))
    if held is None or drops is None or drops > 0:
        return None
    capacity = queue_bytes(wan, wan_packet_bytes(s.metrics))
    if held >= UNFILLED_SHARE * capacity:
        return None
    return (
        f"; the queue is the sender's own (the client's egress in road-warrior: its TCP"
        f" Small Queues keeps each stream's bytes there to about two aggregates), so the"
        f" FIFO held {held / 1000:,.0f} kB of its {capacity / 1000:,.0f} kB with no drop;"
        " a router's FIFO fills (site-to-site, or the download direction)",
        (
            Evidence("client.wan queue held, window's last third", held, "bytes"),
            Evidence("client.wan queue capacity", capacity, "bytes"),
        ),
    )


def probe_lost(s: Subject) -> Finding | None:
    """The round-trip probe's pings lost in the measured window, in half the runs or more: a queue
    that is full when a ping arrives drops it, so the pings that came back (if any) are
    the ones that found room, and the loaded round trip is missing or reads low. Seen:
    two cubic flows kept a 20-packet FIFO of aggregates at 20 Mbit/s full so much of
    the time that all 18 pings of a 2 s window were dropped (bbr's queue lost none)."""
    lossy: list[tuple[float, float]] = []
    for run in s.runs:
        lost = run.get(metric.RTT_LOST.name)
        answered = run.get(metric.RTT_SAMPLES.name)
        if lost is None or answered is None:
            continue
        if lost >= PROBE_LOST_MIN and lost >= PROBE_LOST_SHARE * (lost + answered):
            lossy.append((lost, lost + answered))
    if not lossy or 2 * len(lossy) < len(s.runs):
        return None
    lost, sent = max(lossy, key=lambda pair: pair[0] / pair[1])
    runs = f"{len(lossy)} of {len(s.runs)} runs" if len(s.runs) > 1 else "the run"
    evidence = [Evidence("probe pings lost", lost, ""), Evidence("probe pings sent", sent, "")]
    loaded = s.metrics.get(metric.RTT_LOADED.name)
    tail = (
        f"; the {loaded:.1f} ms read is only what the pings that found room waited"
        if loaded is not None
        else ", so how long packets waited could not be read from them"
    )
    if loaded is not None:
        evidence.append(Evidence("RTT under load (pings that came back)", loaded, "ms"))
    return Finding(
        Bound.LATENCY,
        f"the round-trip probe lost {lost:.0f} of its {sent:.0f} pings in the measured"
        f" window ({runs}): a queue that is full when a ping arrives drops it (bufferbloat"
        f" with tail drop){tail}",
        tuple(evidence),
    )
