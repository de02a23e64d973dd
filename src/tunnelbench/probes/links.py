"""Interface counters of every lab device, before and after the traffic.

One read of ``/proc/net/dev`` per machine gives every device's counters at once: in a
lab namespace from a thread inside it (no process: an emulated guest takes 0.2-0.5 s to
start one), on a real host over its connection (busybox's ``cat`` is enough; its ``ip``
has no JSON). The kernel prints its 64-bit counters there; ``drop`` on receive is
``rx_dropped`` plus ``rx_missed_errors`` (a NIC's ring overflowing, 0 on a veth).
Stored:

- ``link.<role>.<link>.<field>``: deltas of ``rx_bytes``, ``tx_bytes``, ``rx_packets``,
  ``tx_packets``, ``rx_dropped``, ``tx_dropped``, ``rx_errors``, ``tx_errors`` of every
  veth end and the tunnel device (link names: see :mod:`tunnelbench.probes.devices`;
  a real host's devices keep their own names);
- ``tunnel.<role>.<field>``: deltas of the tunnel device's ``rx_/tx_`` ``bytes``,
  ``packets`` and ``dropped`` -- evidence that the traffic really crossed the tunnel.
  These names predate this probe; reports and tests read them.
"""

from collections.abc import Mapping, Sequence

from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.model import metrics as metric
from tunnelbench.probes.devices import DeviceNames
from tunnelbench.probes.trial import (
    Machines,
    ProbeContext,
    ProbeKind,
    ProbeReading,
    TrialProbe,
    read_each,
)

LINK_FIELDS = (
    "rx_bytes",
    "tx_bytes",
    "rx_packets",
    "tx_packets",
    "rx_dropped",
    "tx_dropped",
    "rx_errors",
    "tx_errors",
)
TUNNEL_FIELDS = tuple(f"{d}_{f}" for d in ("rx", "tx") for f in ("bytes", "packets", "dropped"))

Counters = dict[str, int]  # "rx_bytes", "tx_errors", ... -> value


#: ``/proc/net/dev``'s columns after the device's name (net/core/net-procfs.c).
DEV_COLUMNS = (
    *(f"rx_{n}" for n in ("bytes", "packets", "errors", "dropped", "fifo", "frame")),
    *("rx_compressed", "multicast"),
    *(f"tx_{n}" for n in ("bytes", "packets", "errors", "dropped", "fifo", "colls")),
    *("tx_carrier", "tx_compressed"),
)


def parse_links(text: str) -> dict[str, Counters]:
    """Counters by device from ``/proc/net/dev`` (its two header lines skipped); a
    :class:`LabError` for a device line that is not 16 numbers."""
    links: dict[str, Counters] = {}
    for line in text.splitlines():
        device, colon, rest = line.partition(":")
        if not colon or "|" in line:
            continue
        values = rest.split()
        if len(values) != len(DEV_COLUMNS) or not all(v.isdigit() for v in values):
            raise LabError(f"/proc/net/dev: cannot read the line {line.strip()!r}")
        links[device.strip()] = dict(zip(DEV_COLUMNS, map(int, values), strict=True))
    return links


def link_metrics(
    role: str,
    names: DeviceNames,
    before: Mapping[str, Counters],
    after: Mapping[str, Counters],
) -> dict[str, float]:
    """``link.<role>.<link>.<field>`` deltas for every lab device in both readings."""
    metrics: dict[str, float] = {}
    for device in sorted(after):
        link = names.name(role, device)
        if link is None:
            continue
        if device not in before:
            raise LabError(f"device {device} in {role} appeared during the trial")
        for name in LINK_FIELDS:
            metrics[metric.link(role, link, name)] = after[device][name] - before[device][name]
    return metrics


def tunnel_metrics(
    role: str, device: str, before: Mapping[str, Counters], after: Mapping[str, Counters]
) -> dict[str, float]:
    """``tunnel.<role>.<field>`` deltas of the tunnel device ``device``."""
    if device not in before or device not in after:
        raise LabError(f"tunnel device {device} in {role} vanished during the trial")
    return {
        metric.tunnel_device(role, n): after[device][n] - before[device][n] for n in TUNNEL_FIELDS
    }


def busiest(metrics: Mapping[str, float], role: str, field: str) -> float | None:
    """The largest ``link.<role>.*.<field>`` delta: ``role``'s busiest interface; None
    where its interfaces were not counted."""
    found = []
    for name, value in metrics.items():
        device = metric.parse_device(name, "link")
        if device is not None and device[1] == field and device[0].startswith(f"{role}."):
            found.append(value)
    return max(found, default=None)


def counted_seconds(metrics: Mapping[str, float], seconds: float) -> float:
    """The seconds the generator's rates count: its receivers' intervals in the window
    (``goodput.window_s``), else the window's ``seconds``. A rate times the window is
    not what arrived: the intervals whose middle lies in it span a few milliseconds more
    or less, and at 10+ Gbit/s 2 ms is 0.15 % of a 1 s trial (seen in CI)."""
    return metrics.get(metric.GOODPUT_WINDOW.name, seconds)


def arrived_bytes(metrics: Mapping[str, float], seconds: float) -> float:
    """The bytes the generator says arrived over the intervals it counted (``seconds``
    where it names none) in its busier direction (a bidirectional test's two directions
    leave a router by two interfaces). With several processes or directions, the
    shortest one's intervals are named: the busiest rate times them is at most what its
    own intervals received."""
    rates = [metrics[m.name] for m in (metric.UPLOAD, metric.DOWNLOAD) if m.name in metrics]
    return max(rates or [metrics[metric.GOODPUT.name]]) * counted_seconds(metrics, seconds) / 8


def check_forwarded(metrics: Mapping[str, float], routers: Sequence[str], seconds: float) -> None:
    """The second instrument: each router between the client and the server sent, on its
    busiest interface over the trial, at least the bytes the generator says arrived in
    the intervals it counted (the counters span more: warm-up, set-up, headers). A
    :class:`LabError` names the router the traffic did not cross, or miscounted."""
    arrived = arrived_bytes(metrics, seconds)
    for role in routers:
        sent = busiest(metrics, role, "tx_bytes")
        if sent is None or sent < arrived:
            raise LabError(
                f"{role} sent {sent or 0:,.0f} bytes on its busiest interface, fewer than the"
                f" {arrived:,.0f} the generator reports arrived: the traffic did not cross"
                f" {role} (check the route from the client to the server's address)"
            )


def read(host: Host) -> str:
    return host.read_net(["dev"])


class LinkProbe(TrialProbe):
    kind = ProbeKind.LINKS

    def before(self, machines: Machines, context: ProbeContext) -> None:
        self.machines = machines
        self.tunnel_devices = context.tunnel_devices
        self.names = context.names
        self.before_text = read_each(machines.roles, lambda role: read(machines.host(role)))

    def after(self) -> ProbeReading:
        roles = self.machines.roles
        after_text = read_each(roles, lambda role: read(self.machines.host(role)))
        metrics: dict[str, float] = {}
        raw: dict[str, dict[str, dict[str, Counters]]] = {"before": {}, "after": {}}
        for role in roles:
            before, after = parse_links(self.before_text[role]), parse_links(after_text[role])
            metrics |= link_metrics(role, self.names, before, after)
            if role in self.tunnel_devices:
                metrics |= tunnel_metrics(role, self.tunnel_devices[role], before, after)
            raw["before"][role], raw["after"][role] = before, after
        return ProbeReading(metrics, raw)
