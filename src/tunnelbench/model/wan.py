"""The WAN link's figures that follow from its settings: what its impairments add to a
round trip, what its queue holds and how long a packet can wait in it, and the
bandwidth-delay product. Pure; shared by the lab (netem's limit), the probes (how long a
ping may take), the pool (how long a lab takes to drain) and the analysis.

Bytes are counted as the shaper counts them: the IP packet plus the 14-byte Ethernet
header (docs/ceilings.md).
"""

from collections.abc import Mapping

from tunnelbench.kinds import Queue, Shaper
from tunnelbench.model.plan import LinkSettings

ETHERNET_HEADER = 14
#: The most delay (and jitter) a plan may set: 10 s, in microseconds.
DELAY_MAX_US = 10_000_000
#: How the checks below name each impairment: a plan's keys; the command line passes its
#: options instead.
PLAN_KEYS: Mapping[str, str] = {
    name: f"lab.wan.{name}" for name in ("delay", "jitter", "loss", "reorder")
}


def format_us(us: int) -> str:
    """A duration as it is written in a plan: ``20ms``, ``1.5ms``, ``500us``, ``2s``."""
    if us and us % 1_000_000 == 0:
        return f"{us // 1_000_000}s"
    if us >= 1000:
        return f"{us / 1000:g}ms"
    return f"{us}us"


def format_pct(pct: float) -> str:
    """A percentage as it is written in a plan: ``1%``, ``0.1%``."""
    return f"{pct:g}%"


def conflicts(wan: LinkSettings, keys: Mapping[str, str] = PLAN_KEYS) -> list[str]:
    """Impairments that are each valid but cannot go together, each naming its key.

    Jitter varies the delay around its value, so it needs a delay at least as large
    (netem would otherwise clamp the negative delays to zero, and the jitter asked for
    would not be the one applied). Reordering is netem sending some packets at once,
    ahead of the delayed ones: without a delay there is nothing to overtake.
    """
    found = []
    delay = wan.delay or 0
    if wan.jitter:
        if not delay:
            found.append(
                f"{keys['jitter']}: {format_us(wan.jitter)} needs {keys['delay']} of at least"
                " as much (jitter varies the delay around its value)"
            )
        elif wan.jitter > delay:
            found.append(
                f"{keys['jitter']}: {format_us(wan.jitter)} is more than {keys['delay']}"
                f" ({format_us(delay)}); allowed up to the delay (jitter varies the delay"
                " around its value)"
            )
    if wan.reorder and not delay:
        found.append(
            f"{keys['reorder']}: {format_pct(wan.reorder)} needs {keys['delay']} above 0"
            " (netem reorders by sending some packets at once, ahead of the delayed ones)"
        )
    if wan.queue_bytes is not None and wan.queue is not Queue.BFIFO:
        queue = wan.queue.value if wan.queue is not None else "pfifo (the default)"
        named = keys.get("queue", "lab.wan.queue")
        fix = f"set {named} = 'bfifo'" if named.startswith("lab.") else f"give {named} bfifo"
        found.append(
            f"{keys.get('queue_bytes', 'lab.wan.queue_bytes')}: {wan.queue_bytes} is a bfifo's"
            f" limit in bytes, but {named} is {queue}; {fix}"
        )
    return found


def frame_bytes(wan: LinkSettings) -> int:
    """A full-sized packet as the shaper counts it."""
    return wan.mtu + ETHERNET_HEADER


def added_rtt_s(wan: LinkSettings) -> float:
    """The round trip the impairments add on average: the delay each way."""
    return 2 * (wan.delay or 0) / 1e6


def most_delay_s(wan: LinkSettings) -> float:
    """The longest netem holds a packet: delay + jitter (the jitter is uniform)."""
    return ((wan.delay or 0) + (wan.jitter or 0)) / 1e6


#: The largest skb a lab device hands its qdisc: a GSO/GRO aggregate of up to 64 KiB
#: (the kernel's default ``gso_max_size``) plus one set of Ethernet, IP and TCP headers.
#: A packet-limited queue of a lab with offloads on (a real router's default) holds up
#: to this much per packet.
AGGREGATE_MAX_BYTES = 65536 + ETHERNET_HEADER


def bfifo_bytes(wan: LinkSettings) -> int:
    """A byte-limited FIFO's limit: ``queue_bytes``, or ``queue_limit`` full frames."""
    return wan.queue_bytes if wan.queue_bytes is not None else wan.queue_limit * frame_bytes(wan)


def queue_bytes(wan: LinkSettings, packet_bytes: float | None = None) -> float:
    """What the queue under test holds when full.

    A ``bfifo`` holds its byte limit whatever it is handed. A packet-limited queue holds
    ``queue_limit`` packets of ``packet_bytes`` each: the mean bytes per packet its device
    was handed in a trial (offloads on, a real router's default, hand it GSO/GRO
    aggregates of many wire packets; :func:`bytes_per_packet`), or a full frame when no
    trial has said (the wire-packet case).
    """
    if wan.queue is Queue.BFIFO:
        return bfifo_bytes(wan)
    return wan.queue_limit * (packet_bytes or frame_bytes(wan))


def bytes_per_packet(sent_bytes: float, device_packets: float) -> float | None:
    """The mean size of what a queue handed its device: the qdisc's byte count (which
    counts every segment of an aggregate with its headers, as the shaper does) over the
    device's transmit packets (one per skb, aggregate or not); None without packets."""
    return sent_bytes / device_packets if device_packets > 0 else None


def queue_wait_s(wan: LinkSettings, packet_bytes: float | None = None) -> float:
    """How long a packet waits in a full queue at the shaped rate (the bytes it holds /
    rate, :func:`queue_bytes`); 0 on a link that is not shaped."""
    return queue_bytes(wan, packet_bytes) * 8 / wan.rate if wan.rate else 0.0


def longest_queue_wait_s(wan: LinkSettings) -> float:
    """The longest any packet can wait in the queue: a packet-limited queue full of the
    largest aggregates (:data:`AGGREGATE_MAX_BYTES`) unless the lab hands it wire packets
    only (an impaired WAN: offloads off, one segment per skb). For time-outs and bounds,
    not for figures: those use the measured size (:func:`queue_wait_s`)."""
    if wan.impaired or wan.queue is Queue.BFIFO:
        return queue_wait_s(wan)
    return queue_wait_s(wan, AGGREGATE_MAX_BYTES)


def rtt_bound_s(wan: LinkSettings) -> float:
    """The longest round trip the WAN can give a packet crossing it and back: the most
    netem delays it each way, and a full queue at each end."""
    return 2 * (most_delay_s(wan) + longest_queue_wait_s(wan))


def bdp_bytes(rate_bps: float, rtt_s: float) -> float:
    """The bandwidth-delay product: the bytes in flight that keep a link of ``rate_bps``
    busy over a round trip of ``rtt_s``."""
    return rate_bps * rtt_s / 8


#: Queues whose limit counts packets: their bytes grow with the MTU.
PACKET_QUEUES = (None, Queue.PFIFO, Queue.PFIFO_FAST)


def unequal_queues_across_mtus(wans: list[LinkSettings]) -> str | None:
    """Why a plan's shaped WAN MTUs cannot be compared, or None: a packet-limited FIFO
    holds ``queue_limit`` packets of each row's MTU, so a 9000-byte row gets six times
    the queue of a 1500-byte one in bytes and time (measured: 3.6 s at 20 Mbit/s and
    49.5% retransmits). A ``bfifo`` (its bytes fixed), fq_codel (time-based) and cake
    hold the same across MTUs."""
    shaped = [w for w in wans if w.rate is not None and w.queue in PACKET_QUEUES]
    mtus = sorted({w.mtu for w in shaped})
    if len(mtus) < 2:
        return None
    limit = shaped[0].queue_limit
    return (
        f"lab.wan.mtu: {', '.join(map(str, mtus))} are compared with a queue of {limit}"
        f" packets, which holds {limit * (mtus[-1] + ETHERNET_HEADER) / 1e6:,.2f} MB at"
        f" {mtus[-1]} but {limit * (mtus[0] + ETHERNET_HEADER) / 1e6:,.2f} MB at {mtus[0]};"
        " hold the queue in bytes: lab.wan.queue = 'bfifo' with lab.wan.queue_bytes"
        " (or a time-based queue such as fq_codel)"
    )


def burst_bytes(rate: int, mtu: int) -> int:
    """Token bucket depth: one millisecond at the rate, but at least ten full frames.

    Deep enough that the shaper's timer granularity does not cost throughput. A full
    bucket passes above the rate once: 0.01% of a 10 s window at 1 Gbit/s, but 2% of a
    2 s window at 3 Mbit/s, which is what the ceiling's bound allows for
    (:func:`~tunnelbench.analysis.verdicts.above_ceiling_pct`).
    """
    return max(rate // 8 // 1000, 10 * (mtu + ETHERNET_HEADER))


def shaper_lead_bytes(wan: LinkSettings) -> int:
    """The most the shaper can send ahead of its rate, at once: a full bucket
    (:func:`burst_bytes`), and with ``htb`` one packet more. htb sends a packet whenever
    its tokens are not negative and pays for it after, so a GSO aggregate (offloads on, a
    real router's default: up to :data:`AGGREGATE_MAX_BYTES`) leaves in one go; tbf
    segments what its bucket cannot cover and sends nothing its tokens do not pay for.
    A window that opens on such a lead carries it above the rate: a guest's plain TCP
    through htb at 3 Mbit/s read 107% of the ceiling over 2 s (tbf's bound there: 103%).
    0 on a link that is not shaped."""
    if wan.rate is None:
        return 0
    lead = burst_bytes(wan.rate, wan.mtu)
    if wan.shaper is Shaper.HTB:
        lead += frame_bytes(wan) if wan.impaired else AGGREGATE_MAX_BYTES
    return lead
