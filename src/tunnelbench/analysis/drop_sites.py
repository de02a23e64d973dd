"""Where a trial's packets were dropped, by the counters the probes record.

Each lab device's root qdisc (``qdisc.<role>.<link>.drops``) and interface
(``link.<role>.<link>.{rx,tx}_dropped``) count their own drops; the link name says what
the device is (:mod:`tunnelbench.probes.devices`). What is done about a drop depends on
where it happened:

- ``wan``: the WAN queue under test (the qdisc on a WAN end, or that device's own
  transmit drops): its discipline and limit are the plan's ``lab.wan.queue`` settings;
- ``tunnel``: the tunnel device's own queue. A userspace tunnel's TUN device holds what
  the kernel routes into the tunnel until its daemon reads it; when the daemon cannot
  keep up, that queue overflows, whatever the WAN queue does;
- ``other``: anything else (a LAN link, a receiving device's backlog).

netem's emulated loss (``netem_drops``) is counted apart: it is loss the plan asked for.
Pure functions of one trial's (or the medians') metrics.
"""

from dataclasses import dataclass
from typing import Literal

from tunnelbench.model import metrics as metric

Where = Literal["wan", "tunnel", "other"]
#: The stored names of the WAN link and of the tunnel device in metric names (the probes'
#: stable device names: tunnelbench.probes.devices, which analysis sits below).
WAN_LINK, TUNNEL_LINK = "wan", "tunnel"


@dataclass(frozen=True)
class DropSite:
    """One counter that dropped packets, with what was offered to it."""

    device: str  # "<role>.<link>", as the metric names it
    counter: str  # "qdisc", "tx" or "rx"
    drops: float
    passed: float  # packets it sent (qdisc, tx) or received (rx)

    @property
    def link(self) -> str:
        """The device's stable name: ``wan``, ``tunnel``, ``lan``..."""
        return self.device.split(".", 1)[1]

    @property
    def where(self) -> Where:
        if self.link == WAN_LINK:
            return "wan"
        if self.link == TUNNEL_LINK:
            return "tunnel"
        return "other"

    @property
    def share_pct(self) -> float:
        """Drops per packet offered to it, in %."""
        offered = self.drops + self.passed
        return 100.0 * self.drops / offered if offered > 0 else 0.0

    @property
    def name(self) -> str:
        """``qdisc on client.wan``, ``tx of client.tunnel``."""
        if self.counter == "qdisc":
            return f"qdisc on {self.device}"
        return f"{self.counter} of {self.device}"


def sites(metrics: dict[str, float]) -> list[DropSite]:
    """Every qdisc and interface counter of drops the trial recorded, dropped or not:
    the qdiscs first, each family in the order of the metrics' names."""
    qdiscs, links = [], []
    for name, value in sorted(metrics.items()):
        if (parsed := metric.parse_device(name, "qdisc")) is not None and parsed[1] == "drops":
            role, link = parsed[0].split(".", 1)
            sent = metrics.get(metric.qdisc(role, link, "sent_packets"), 0.0)
            qdiscs.append(DropSite(parsed[0], "qdisc", value, sent))
        elif (parsed := metric.parse_device(name, "link")) is not None and parsed[1] in (
            "rx_dropped",
            "tx_dropped",
        ):
            role, link = parsed[0].split(".", 1)
            direction = parsed[1].removesuffix("_dropped")
            passed = metrics.get(metric.link(role, link, f"{direction}_packets"), 0.0)
            links.append(DropSite(parsed[0], direction, value, passed))
    return qdiscs + links


def dropped(metrics: dict[str, float], where: Where | None = None) -> float | None:
    """Packets the recorded counters dropped (at ``where`` only, when given); None when
    no counter of that kind was recorded."""
    chosen = [s for s in sites(metrics) if where is None or s.where == where]
    return sum(s.drops for s in chosen) if chosen else None


def netem_dropped(metrics: dict[str, float]) -> float:
    """Packets netem dropped on purpose (``lab.wan.loss``, and its delay line's limit)."""
    return sum(
        v
        for n, v in metrics.items()
        if (device := metric.parse_device(n, "qdisc")) and device[1] == "netem_drops"
    )
