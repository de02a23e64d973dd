"""Interface counters of every lab device, before and after the traffic.

One ``ip -j -s link show`` per namespace gives every device's counters at once. Stored:

- ``link.<role>.<link>.<field>``: deltas of ``rx_packets``, ``tx_packets``,
  ``rx_dropped``, ``tx_dropped``, ``rx_errors``, ``tx_errors`` of every veth end and the
  tunnel device (link names: see :mod:`tunnelbench.probes.devices`);
- ``tunnel.<role>.<field>``: deltas of the tunnel device's ``rx_/tx_`` ``bytes``,
  ``packets`` and ``dropped`` -- evidence that the traffic really crossed the tunnel.
  These names predate this probe; reports and tests read them.
"""

import json
from collections.abc import Mapping

from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.lab.netns import Lab
from tunnelbench.model import metrics as metric
from tunnelbench.probes.devices import DeviceNames
from tunnelbench.probes.trial import (
    ProbeContext,
    ProbeKind,
    ProbeReading,
    TrialProbe,
    read_each,
)

LINK_FIELDS = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped", "rx_errors", "tx_errors")
TUNNEL_FIELDS = tuple(f"{d}_{f}" for d in ("rx", "tx") for f in ("bytes", "packets", "dropped"))

Counters = dict[str, int]  # "rx_bytes", "tx_errors", ... -> value


def parse_links(text: str) -> dict[str, Counters]:
    """Counters by device from ``ip -j -s link show`` (64-bit ``stats64``)."""
    links: dict[str, Counters] = {}
    for link in json.loads(text):
        stats = link["stats64"]
        links[link["ifname"]] = {
            f"{direction}_{name}": int(value)
            for direction in ("rx", "tx")
            for name, value in stats[direction].items()
        }
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


def read(host: Host) -> str:
    return host.run(["ip", "-j", "-s", "link", "show"]).stdout


class LinkProbe(TrialProbe):
    kind = ProbeKind.LINKS

    def before(self, lab: Lab, context: ProbeContext) -> None:
        self.lab = lab
        self.tunnel_devices = context.tunnel_devices
        self.names = DeviceNames.of(lab, context.tunnel_devices)
        self.before_text = read_each(lab.chain.roles, lambda role: read(lab.host(role)))

    def after(self) -> ProbeReading:
        after_text = read_each(self.lab.chain.roles, lambda role: read(self.lab.host(role)))
        metrics: dict[str, float] = {}
        for role in self.lab.chain.roles:
            before, after = parse_links(self.before_text[role]), parse_links(after_text[role])
            metrics |= link_metrics(role, self.names, before, after)
            if role in self.tunnel_devices:
                metrics |= tunnel_metrics(role, self.tunnel_devices[role], before, after)
        raw = {
            "before": {r: json.loads(t) for r, t in self.before_text.items()},
            "after": {r: json.loads(t) for r, t in after_text.items()},
        }
        return ProbeReading(metrics, raw)
