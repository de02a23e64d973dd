"""``tc`` command lines that shape a link's egress to a rate.

The shaper counts bytes as Linux sees them: the IP packet plus the 14-byte Ethernet
header, without preamble, inter-frame gap or FCS (the ceiling model must use the same).
"""

from tunnelbench.kinds import Shaper
from tunnelbench.units import format_rate

ETHERNET_HEADER = 14


def burst_bytes(rate: int, mtu: int) -> int:
    """Token bucket depth: one millisecond at the rate, but at least ten full frames.

    Deep enough that the shaper's timer granularity does not cost throughput, shallow
    enough that the link does not run measurably above its rate within a 1 s interval.
    """
    return max(rate // 8 // 1000, 10 * (mtu + ETHERNET_HEADER))


def shaping_commands(
    device: str, shaper: Shaper, rate: int, mtu: int, queue_limit: int
) -> list[list[str]]:
    """``tc`` argument lists (without the leading ``tc -n NS``) for one device."""
    burst = str(burst_bytes(rate, mtu))
    tc_rate = format_rate(rate)
    if shaper is Shaper.TBF:
        limit = str(queue_limit * (mtu + ETHERNET_HEADER))
        return [
            ["qdisc", "replace", "dev", device, "root", "handle", "1:", "tbf"]
            + ["rate", tc_rate, "burst", burst, "limit", limit]
        ]
    return [
        ["qdisc", "replace", "dev", device, "root", "handle", "1:", "htb", "default", "1"],
        ["class", "add", "dev", device, "parent", "1:", "classid", "1:1", "htb"]
        + ["rate", tc_rate, "ceil", tc_rate, "burst", burst, "cburst", burst],
        ["qdisc", "add", "dev", device, "parent", "1:1", "handle", "10:", "pfifo"]
        + ["limit", str(queue_limit)],
    ]
