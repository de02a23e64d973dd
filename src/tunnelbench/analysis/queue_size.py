"""What the bottleneck queue held, and what the flows through it need of it.

A packet-limited FIFO holds ``queue_limit`` of whatever its device is handed: wire
packets where the lab turns offloads off, GSO/GRO aggregates of many wire packets where
offloads stay on (a real router's default). So its size in bytes is the limit times the
mean bytes per packet its device sent in the trial: the qdisc's byte count (every
segment of an aggregate, with its headers) over the device's transmit packets (one per
skb). A run that did not record both falls back to a full wire frame, and the evidence
says which it used.

What the flows need of it, in full segments:

- **the bandwidth-delay product over the square root of the flows** (one product for
  one flow): a loss-based sender shrinks its window at a drop and the queue keeps the
  link busy while it grows back; many desynchronised flows need less each (Appenzeller,
  Keslassy and McKeown, "Sizing router buffers", 2004);
- **four segments a flow** in flight, queue and path together: fast retransmit needs
  three duplicate ACKs after the lost segment, and a flow with a smaller window repairs
  its losses by a timeout instead. In a lab whose round trip is a fraction of a
  millisecond the product is under one packet, and this is what a queue must hold (a
  4-packet FIFO shared by 4 flows at 100 Mbit/s: 6 retransmission timeouts a second and
  79.5% of the ceiling; 16 packets: 2 and 89.8%; 64: 1 and 99.8%).

Pure: reads a configuration's settings and medians, never the system.
"""

import math
from dataclasses import dataclass

from tunnelbench.kinds import Queue
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.wan import added_rtt_s, bdp_bytes, bytes_per_packet, frame_bytes
from tunnelbench.units import human_rate

#: The segments a flow needs in flight for fast retransmit: the lost one and three more
#: whose duplicate ACKs announce the loss.
FLOW_WINDOW_SEGMENTS = 4
#: The most a TCP sender keeps in its socket's send buffer: Linux's default
#: ``net.ipv4.tcp_wmem`` maximum (4 MiB). What all the senders hold is all a FIFO can
#: queue of theirs, however large its limit: at 1 Gbit/s and a sub-ms path a
#: 1000-aggregate FIFO settled at ~107 ms with no drop, a steady state. The trials
#: do not record the sysctl; the lab's namespaces inherit the kernel's default.
TCP_WMEM_MAX_BYTES = 4 * 2**20
#: Queues limited in packets that drop at the tail: their limit is all the buffer a flow
#: gets (fair and delay-managing queues keep their own, much shorter standing queue).
PACKET_FIFOS = (None, Queue.PFIFO, Queue.PFIFO_FAST)


@dataclass(frozen=True)
class QueueSize:
    """The WAN queue of one configuration, in bytes and in full segments."""

    limit: int  # packets (skbs) the queue holds
    frame: int  # a full wire frame as the shaper counts it
    #: The mean bytes per packet the queue's device sent; None when not recorded.
    measured: float | None
    rtt_s: float  # the round trip the product is taken over
    rate_bps: int
    flows: int

    @property
    def packet_bytes(self) -> float:
        """What one queued packet holds when the queue is full of the flows' data: the
        measured mean where it is an aggregate's, else a full frame (a mean below one is
        the small packets mixed in, which do not fill a queue of bulk traffic)."""
        return max(self.measured or 0.0, float(self.frame))

    @property
    def held_bytes(self) -> float:
        return self.limit * self.packet_bytes

    @property
    def bdp(self) -> float:
        return bdp_bytes(self.rate_bps, self.rtt_s)

    @property
    def need_bytes(self) -> float:
        """The buffer the flows need: the product over the square root of the flows, or
        what gives each flow a window of :data:`FLOW_WINDOW_SEGMENTS` beyond what the
        path itself holds, whichever is more."""
        windows = self.flows * FLOW_WINDOW_SEGMENTS * self.frame - self.bdp
        return max(self.bdp / math.sqrt(self.flows), windows, 0.0)

    @property
    def short(self) -> bool:
        """Whether the queue holds less than its flows need."""
        return self.held_bytes < self.need_bytes

    @property
    def need_reason(self) -> str:
        """Which of the two needs set :attr:`need_bytes`, in words."""
        product = self.bdp / math.sqrt(self.flows)
        windows = self.flows * FLOW_WINDOW_SEGMENTS * self.frame - self.bdp
        if windows > product:
            each = "each of its" if self.flows > 1 else "its"
            return (
                f"{FLOW_WINDOW_SEGMENTS} full segments for {each} {self.flows} flow"
                f"{'s' if self.flows > 1 else ''} beyond the {self.bdp / 1000:,.1f} kB the"
                f" path holds at RTT {self.rtt_s * 1000:,.3g} ms"
            )
        over = "" if self.flows == 1 else f" over the square root of {self.flows} flows"
        return (
            f"the bandwidth-delay product, {self.bdp / 1000:,.1f} kB at"
            f" {human_rate(self.rate_bps)} and RTT {self.rtt_s * 1000:,.3g} ms{over}"
        )

    def packets_for(self, n_bytes: float) -> int:
        """How many of this queue's packets hold ``n_bytes``."""
        return max(1, math.ceil(n_bytes / self.packet_bytes - 1e-9))

    @property
    def per_packet_text(self) -> str:
        """How the packet size was taken, for a finding's sentence."""
        if self.measured is None:
            return f"full frames of {self.frame:,} bytes, the packet size not recorded"
        if self.measured > self.frame:
            return f"{self.measured:,.0f} bytes a packet as measured: GSO/GRO aggregates"
        return f"wire packets of up to {self.frame:,} bytes, measured mean {self.measured:,.0f}"

    def evidence(self) -> list[tuple[str, float, str]]:
        """(name, value, unit) of the figures behind a finding or advice."""
        size = (
            ("bytes per queued packet, measured (qdisc bytes / device packets)", self.measured)
            if self.measured is not None
            else ("bytes per queued packet, a full frame (not recorded)", float(self.frame))
        )
        return [
            ("queue", self.held_bytes, "bytes"),
            (size[0], size[1], "bytes"),
            ("bandwidth-delay product", self.bdp, "bytes"),
            ("round trip", self.rtt_s * 1000, "ms"),
            ("flows", float(self.flows), ""),
            ("buffer the flows need", self.need_bytes, "bytes"),
        ]


def senders_bound_bytes(config: TrialConfig) -> int:
    """What the senders can have queued at all: each stream's socket buffer
    (:data:`TCP_WMEM_MAX_BYTES`) times the streams."""
    return max(1, config.traffic.streams) * TCP_WMEM_MAX_BYTES


def wan_packet_bytes(metrics: dict[str, float]) -> float | None:
    """The mean bytes per packet the WAN queue of the data's direction sent: over the
    WAN ends whose qdisc and device counters were both recorded, the one that sent the
    most bytes; None when neither end recorded both."""
    found = []
    for name, sent in metrics.items():
        device = metric.parse_device(name, "qdisc")
        if device is None or device[1] != "sent_bytes" or not device[0].endswith(".wan"):
            continue
        role = device[0].removesuffix(".wan")
        size = bytes_per_packet(sent, metrics.get(metric.link(role, "wan", "tx_packets"), 0.0))
        if size is not None:
            found.append((sent, size))
    return max(found)[1] if found else None


def round_trip_s(config: TrialConfig, metrics: dict[str, float]) -> float:
    """The round trip of the path: the idle one measured, or the delay the WAN adds both
    ways when it was not (the larger, since the measured one includes the delay)."""
    idle_ms = metrics.get(metric.RTT_IDLE.name)
    return max(added_rtt_s(config.lab.wan), idle_ms / 1000 if idle_ms is not None else 0.0)


def wan_queue(config: TrialConfig, metrics: dict[str, float]) -> QueueSize | None:
    """The shaped WAN's packet-limited FIFO as one configuration ran it; None for a link
    without a rate or another kind of queue."""
    wan = config.lab.wan
    if wan.rate is None or wan.queue not in PACKET_FIFOS:
        return None
    return QueueSize(
        limit=wan.queue_limit,
        frame=frame_bytes(wan),
        measured=wan_packet_bytes(metrics),
        rtt_s=round_trip_s(config, metrics),
        rate_bps=wan.rate,
        flows=max(1, config.traffic.streams),
    )
