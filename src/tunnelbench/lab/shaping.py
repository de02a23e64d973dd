"""``tc`` (and ``ip``) command lines for a link's egress: the shaper and its queue.

The shaper counts bytes as Linux sees them: the IP packet plus the 14-byte Ethernet
header, without preamble, inter-frame gap or FCS (the ceiling model must use the same).

With a rate, a ``tbf`` or ``htb`` shaper sits at the root and the queue discipline is its
explicit leaf, so the queue under test holds the packets the shaper is not yet sending.
``cake`` runs ``unlimited`` there: the tbf/htb shaper does the shaping for every queue
kind, so queue disciplines are compared like for like. Without a rate the queue, when one
is asked for, is the device's root qdisc (a veth has none by default).
"""

from tunnelbench.kinds import Queue, Shaper
from tunnelbench.units import format_rate

ETHERNET_HEADER = 14
#: The handles used: the shaper (or unshaped queue) at the root, its leaf below.
ROOT_HANDLE = "1:"
LEAF_HANDLE = "10:"
SHAPER_CLASS = "1:1"


def burst_bytes(rate: int, mtu: int) -> int:
    """Token bucket depth: one millisecond at the rate, but at least ten full frames.

    Deep enough that the shaper's timer granularity does not cost throughput, shallow
    enough that the link does not run measurably above its rate within a 1 s interval.
    """
    return max(rate // 8 // 1000, 10 * (mtu + ETHERNET_HEADER))


def queue_qdisc(queue: Queue | None, limit: int) -> list[str]:
    """The qdisc kind and its parameters, as ``tc`` takes them after the handle.

    ``None`` is a pfifo. ``pfifo_fast`` has no limit parameter: it holds the device's
    ``txqueuelen`` packets, which :func:`device_commands` sets.
    """
    queue = queue or Queue.PFIFO
    if queue is Queue.PFIFO_FAST:
        return ["pfifo_fast"]
    if queue is Queue.CAKE:
        return ["cake", "unlimited"]
    return [queue.value, "limit", str(limit)]


def shaping_commands(
    device: str,
    shaper: Shaper,
    rate: int,
    mtu: int,
    queue_limit: int,
    queue: Queue | None = None,
) -> list[list[str]]:
    """``tc`` argument lists (without the leading ``tc -n NS``) shaping one device.

    The shaper at the root, ``queue`` as its leaf (class ``1:1``; for tbf that is its one
    child). Run :func:`device_commands` first.
    """
    burst = str(burst_bytes(rate, mtu))
    tc_rate = format_rate(rate)
    leaf = ["qdisc", "add", "dev", device, "parent", SHAPER_CLASS, "handle", LEAF_HANDLE]
    leaf += queue_qdisc(queue, queue_limit)
    if shaper is Shaper.TBF:
        # tbf needs a limit of its own; it sizes tbf's default byte fifo, which the
        # explicit leaf replaces.
        limit = str(queue_limit * (mtu + ETHERNET_HEADER))
        return [
            ["qdisc", "replace", "dev", device, "root", "handle", ROOT_HANDLE, "tbf"]
            + ["rate", tc_rate, "burst", burst, "limit", limit],
            leaf,
        ]
    return [
        ["qdisc", "replace", "dev", device, "root", "handle", ROOT_HANDLE, "htb", "default", "1"],
        ["class", "add", "dev", device, "parent", ROOT_HANDLE, "classid", SHAPER_CLASS, "htb"]
        + ["rate", tc_rate, "ceil", tc_rate, "burst", burst, "cburst", burst],
        leaf,
    ]


def queue_commands(device: str, queue: Queue | None, queue_limit: int) -> list[list[str]]:
    """``tc`` argument lists for an unshaped device: ``queue`` as its root qdisc.

    ``None`` leaves the device's default (a veth's ``noqueue``): nothing to run.
    """
    if queue is None:
        return []
    root = ["qdisc", "replace", "dev", device, "root", "handle", ROOT_HANDLE]
    return [root + queue_qdisc(queue, queue_limit)]


def device_commands(device: str, queue: Queue | None, queue_limit: int) -> list[list[str]]:
    """``ip`` argument lists to run before the ``tc`` ones: ``pfifo_fast`` takes its
    length from the device's ``txqueuelen``, so that is set to the queue limit."""
    if queue is not Queue.PFIFO_FAST:
        return []
    return [["link", "set", "dev", device, "txqueuelen", str(queue_limit)]]
