"""``tc`` (and ``ip``) command lines for a link's egress: the shaper and its queue.

The shaper counts bytes as Linux sees them: the IP packet plus the 14-byte Ethernet
header, without preamble, inter-frame gap or FCS (the ceiling model must use the same).

With a rate, a ``tbf`` or ``htb`` shaper sits at the root and the queue discipline is its
explicit leaf, so the queue under test holds the packets the shaper is not yet sending.
``cake`` runs ``unlimited`` there: the tbf/htb shaper does the shaping for every queue
kind, so queue disciplines are compared like for like. Without a rate the queue, when one
is asked for, is the device's root qdisc (a veth has none by default).

With impairments (``lab.wan.delay``, ``jitter``, ``loss``, ``reorder``) ``netem`` is the
root and everything above moves one level down: the shaper is netem's child, the queue
under test still the shaper's leaf (or, unshaped, netem's child). Packets are delayed,
lost or reordered first and then meet the bottleneck, so the queue under test holds only
packets waiting for the link and a packet's wait in it is its own sojourn time, not the
emulated path's delay::

    netem 1: (delay, jitter, loss, reorder)     netem 1:
      └ tbf 2: / htb 2: class 2:1 (the rate)      └ queue 10: (if any)
          └ queue 10: (the queue under test)

netem keeps every packet of its delay line in its own time-ordered queue (tfifo) and
drops what exceeds its ``limit``; :func:`netem_limit` sizes it so that it never does.
With ``jitter`` each packet's delay is drawn uniformly from delay ± jitter (no
``distribution``: tc sends no table, and the kernel then draws uniformly), and the tfifo
would send a packet drawn shorter before one drawn longer: jitter alone reorders. A
``rate`` far above anything the lab carries (:data:`ORDER_RATE`) makes netem time each
packet from the one before it (never earlier, plus a few nanoseconds of serialization),
which keeps them in order, as a real path's varying queues do. Under load packets then
bunch behind the slowest draw, so the delay a busy flow sees tends towards delay +
jitter; an idle ping sees the whole spread. Reordering is only what ``reorder`` asks
for: that share of packets is sent at once, ahead of the delayed ones.
"""

from tunnelbench.kinds import Queue, Shaper
from tunnelbench.model.plan import LinkSettings
from tunnelbench.model.wan import bfifo_bytes, burst_bytes, frame_bytes
from tunnelbench.units import format_rate

#: The handles used: the shaper (or unshaped queue) at the root, its leaf below.
ROOT_HANDLE = "1:"
LEAF_HANDLE = "10:"
SHAPER_CLASS = "1:1"
#: With impairments netem takes the root handle; its one class holds its child: the
#: shaper, which then takes handle 2: (its class 2:1 holding the leaf), or the queue.
NETEM_HANDLE = ROOT_HANDLE
NETEM_CLASS = "1:1"
SHAPER_UNDER_NETEM = "2:"
#: netem's rate when it must keep jittered packets in order: 1 Tbit/s, far above any link
#: of the lab (a veth carries tens of Gbit/s), so it never limits: a 1514-byte packet
#: takes 12 ns at it, a 64 KiB GSO bundle 0.5 us.
ORDER_RATE = 10**12
#: Room in netem's limit beyond twice the bandwidth-delay product, in packets.
NETEM_LIMIT_MARGIN = 1000
#: netem's limit on a link that is not shaped. There is no rate to size it by, so it is
#: large: what a sender can have in flight is bounded by its socket buffers (Linux's
#: default tcp_wmem maximum, 4 MiB, is about 2,800 full frames per stream), and 100,000
#: packets hold that for dozens of streams, or 100 ms of full frames at 12 Gbit/s (an
#: impaired lab turns GSO off, so an entry is one wire packet).
UNSHAPED_NETEM_LIMIT = 100_000


def queue_qdisc(wan: LinkSettings) -> list[str]:
    """The queue under test's kind and parameters, as ``tc`` takes them after the handle.

    ``None`` is a pfifo of ``queue_limit`` packets; ``bfifo`` is limited in bytes
    (:func:`~tunnelbench.model.wan.bfifo_bytes`). ``pfifo_fast`` has no limit parameter:
    it holds the device's ``txqueuelen`` packets, which :func:`device_commands` sets.
    """
    queue = wan.queue or Queue.PFIFO
    if queue is Queue.PFIFO_FAST:
        return ["pfifo_fast"]
    if queue is Queue.CAKE:
        return ["cake", "unlimited"]
    if queue is Queue.BFIFO:
        return ["bfifo", "limit", str(bfifo_bytes(wan))]
    return [queue.value, "limit", str(wan.queue_limit)]


def shaping_commands(
    device: str, wan: LinkSettings, *, parent: str | None = None
) -> list[list[str]]:
    """``tc`` argument lists (without the leading ``tc -n NS``) shaping one device at
    ``wan.rate``.

    The shaper at the root, the queue under test as its leaf (class ``1:1``; for tbf that
    is its one child). With ``parent`` (netem's class) the shaper is that class's child
    instead, with handle ``2:`` and its leaf under ``2:1``. Run :func:`device_commands`
    first.
    """
    if wan.rate is None:
        raise ValueError("shaping_commands needs a rate")
    shaper = wan.shaper
    burst = str(burst_bytes(wan.rate, wan.mtu))
    tc_rate = format_rate(wan.rate)
    if parent is None:
        handle, shaper_class, place = ROOT_HANDLE, SHAPER_CLASS, ["replace", "dev", device, "root"]
    else:
        handle, shaper_class = SHAPER_UNDER_NETEM, SHAPER_UNDER_NETEM + "1"
        place = ["add", "dev", device, "parent", parent]
    leaf = ["qdisc", "add", "dev", device, "parent", shaper_class, "handle", LEAF_HANDLE]
    leaf += queue_qdisc(wan)
    if shaper is Shaper.TBF:
        # tbf needs a limit of its own; it sizes tbf's default byte fifo, which the
        # explicit leaf replaces.
        limit = str(bfifo_bytes(wan))
        return [
            ["qdisc", *place, "handle", handle, "tbf"]
            + ["rate", tc_rate, "burst", burst, "limit", limit],
            leaf,
        ]
    return [
        ["qdisc", *place, "handle", handle, "htb", "default", "1"],
        ["class", "add", "dev", device, "parent", handle, "classid", shaper_class, "htb"]
        + ["rate", tc_rate, "ceil", tc_rate, "burst", burst, "cburst", burst],
        leaf,
    ]


def queue_commands(device: str, wan: LinkSettings, *, parent: str | None = None) -> list[list[str]]:
    """``tc`` argument lists for an unshaped device: the queue under test as its root
    qdisc, or with ``parent`` (netem's class) as that class's child, with the leaf's
    handle ``10:``.

    No ``wan.queue`` leaves the device's default (a veth's ``noqueue``; under netem,
    netem's own time-ordered queue): nothing to run.
    """
    if wan.queue is None:
        return []
    if parent is None:
        place = ["qdisc", "replace", "dev", device, "root", "handle", ROOT_HANDLE]
    else:
        place = ["qdisc", "add", "dev", device, "parent", parent, "handle", LEAF_HANDLE]
    return [place + queue_qdisc(wan)]


def netem_limit(wan: LinkSettings) -> int:
    """The packets netem may hold, sized so that it never drops one by overflow.

    Every packet in flight on the delay line sits in netem's queue for up to delay +
    jitter. Shaped: twice the bandwidth-delay product of that time in full frames at the
    link's rate (a sender in slow start sends at up to twice the rate it is acknowledged
    at), plus :data:`NETEM_LIMIT_MARGIN`. Unshaped: :data:`UNSHAPED_NETEM_LIMIT`.
    """
    if wan.rate is None:
        return UNSHAPED_NETEM_LIMIT
    held_us = (wan.delay or 0) + (wan.jitter or 0)
    in_flight = -(-wan.rate * held_us // (8_000_000 * frame_bytes(wan)))  # rounded up, exact
    return 2 * in_flight + NETEM_LIMIT_MARGIN


def netem_qdisc(wan: LinkSettings) -> list[str]:
    """netem and its parameters, as ``tc`` takes them after the handle: delay (and
    jitter, kept in order by :data:`ORDER_RATE`), random loss and reordering."""
    argv = ["netem", "limit", str(netem_limit(wan))]
    if wan.delay:
        argv += ["delay", f"{wan.delay}us"] + ([f"{wan.jitter}us"] if wan.jitter else [])
    if wan.jitter:
        argv += ["rate", format_rate(ORDER_RATE)]
    if wan.loss:
        argv += ["loss", "random", f"{wan.loss:g}%"]
    if wan.reorder:
        argv += ["reorder", f"{wan.reorder:g}%"]
    return argv


def link_commands(device: str, wan: LinkSettings) -> list[list[str]]:
    """Every ``tc`` argument list for one end of the WAN link, root first: netem when
    the link is impaired, then the shaper and its leaf, or the unshaped queue."""
    commands, parent = [], None
    if wan.impaired:
        commands = [["qdisc", "replace", "dev", device, "root", "handle", NETEM_HANDLE]]
        commands[0] += netem_qdisc(wan)
        parent = NETEM_CLASS
    if wan.rate is not None:
        return commands + shaping_commands(device, wan, parent=parent)
    return commands + queue_commands(device, wan, parent=parent)


def device_commands(device: str, queue: Queue | None, queue_limit: int) -> list[list[str]]:
    """``ip`` argument lists to run before the ``tc`` ones: ``pfifo_fast`` takes its
    length from the device's ``txqueuelen``, so that is set to the queue limit."""
    if queue is not Queue.PFIFO_FAST:
        return []
    return [["link", "set", "dev", device, "txqueuelen", str(queue_limit)]]
