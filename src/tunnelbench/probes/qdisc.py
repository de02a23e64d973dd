"""Root queue-discipline statistics of every lab device, before and after the traffic.

One ``tc -s -j qdisc show`` per namespace, or its answer read over rtnetlink in the
lab's own (:meth:`~tunnelbench.lab.host.Host.qdiscs`). For each lab device whose root qdisc is not
``noqueue`` (the shaped WAN ends, a userspace tunnel's TUN device with its default
``pfifo_fast``) the trial stores, as ``qdisc.<role>.<link>.<field>`` (link names: see
:mod:`tunnelbench.probes.devices`):

- deltas of the root's ``sent_bytes``, ``sent_packets``, ``drops``, ``overlimits``,
  ``requeues``;
- the root's ``backlog_bytes`` and ``backlog_packets`` after the traffic (a gauge);
- ``leaf_drops``, the delta of the drops of the root's only child qdisc, when it has one
  (the shaper's leaf).

On an impaired WAN ``netem`` is the root and the shaper (or the queue) its child
(:mod:`tunnelbench.lab.shaping`). The fields above then describe netem's child, the queue
under test, as they do without impairments, so that its drops are the queue's alone, and
``netem_drops`` is the delta of netem's own drops: its emulated loss (and overflow of its
delay line, which its limit is sized to prevent). netem counts its child's drops with its
own, as a shaper does its leaf's, so its own are its count minus its child's. A netem
with nothing beneath it (no rate, no queue) gives its own counters, ``drops`` 0 (there
is no queue to drop) and all its drops as ``netem_drops``.

A root shaper counts the drops of its child: on this kernel (6.18) a 100 Mbit/s lab with
a 5-packet pfifo leaf under ``tbf`` dropped 9,551 packets in 2 s at both the root and the
leaf, and under ``htb`` 230 at both (the fixtures ``qdisc-tbf-*`` and ``qdisc-htb-*``,
checked in ``tests/unit/test_qdisc_probe.py``).
They can still differ, which is why the leaf's count is kept as well: ``tbf`` drops at
the root alone a packet larger than its bucket that it cannot segment, ``htb`` drops at
the root alone what overflows its direct queue, and a leaf such as fq_codel or cake
(which this kernel lacks, so it is unverified here) drops inside the leaf at dequeue.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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

#: Counter fields: metric name -> key in tc's JSON.
COUNTERS = {
    "sent_bytes": "bytes",
    "sent_packets": "packets",
    "drops": "drops",
    "overlimits": "overlimits",
    "requeues": "requeues",
}
#: Gauges, stored as read after the traffic.
GAUGES = {"backlog_bytes": "backlog", "backlog_packets": "qlen"}


@dataclass(frozen=True)
class RootQdisc:
    """A device's root qdisc: its identity, its counters and its leaf's drops."""

    kind: str
    handle: str
    values: dict[str, int]  # metric field -> value (counters and gauges)
    leaf_drops: int | None  # drops of its only child qdisc; None without exactly one
    netem_drops: int | None = None  # a netem root's own drops; None without one


def parse_qdiscs(text: str) -> dict[str, RootQdisc]:
    """Root qdiscs by device from ``tc -s -j qdisc show``, ``noqueue`` ones left out; a
    netem root's figures are its child's, with netem's own drops apart."""
    entries: list[dict[str, Any]] = json.loads(text)
    roots: dict[str, RootQdisc] = {}
    for entry in entries:
        if not entry.get("root") or entry["kind"] == "noqueue":
            continue
        device, handle = entry["dev"], entry["handle"]
        top, netem_drops = entry, None
        if entry["kind"] == "netem":
            below = _children(entries, device, handle)
            top = below[0] if len(below) == 1 else entry
            netem_drops = int(entry["drops"]) - (0 if top is entry else int(top["drops"]))
        values = {name: int(top[key]) for name, key in (COUNTERS | GAUGES).items()}
        if top is entry and netem_drops is not None:
            values["drops"] = 0  # netem alone: no queue, and its own drops are apart
        children = _children(entries, device, top["handle"])
        leaf = int(children[0]["drops"]) if len(children) == 1 else None
        roots[device] = RootQdisc(entry["kind"], handle, values, leaf, netem_drops)
    return roots


def _children(entries: list[dict[str, Any]], device: str, handle: str) -> list[dict[str, Any]]:
    """The qdiscs directly under ``handle`` on ``device``: they sit under one of its
    classes (parent "1:1" for "1:")."""
    return [
        e
        for e in entries
        if e["dev"] == device
        and not e.get("root")
        and e.get("parent", "").split(":")[0] + ":" == handle
    ]


def qdisc_metrics(
    role: str,
    names: DeviceNames,
    before: Mapping[str, RootQdisc],
    after: Mapping[str, RootQdisc],
) -> dict[str, float]:
    """``qdisc.<role>.<link>.<field>`` for every lab device with a root qdisc.

    A root qdisc that appeared, vanished or was replaced during the trial is a
    :class:`LabError`: its counters would not measure the trial.
    """
    metrics: dict[str, float] = {}
    for device in sorted(set(before) | set(after)):
        link = names.name(role, device)
        if link is None:
            continue
        old, new = before.get(device), after.get(device)
        if old is None or new is None or (old.kind, old.handle) != (new.kind, new.handle):
            raise LabError(
                f"qdisc of {device} in {role} changed during the trial: "
                f"{_describe(old)} before, {_describe(new)} after"
            )
        for name in COUNTERS:
            metrics[metric.qdisc(role, link, name)] = new.values[name] - old.values[name]
        for name in GAUGES:
            metrics[metric.qdisc(role, link, name)] = new.values[name]
        if old.leaf_drops is not None and new.leaf_drops is not None:
            metrics[metric.qdisc(role, link, "leaf_drops")] = new.leaf_drops - old.leaf_drops
        if old.netem_drops is not None and new.netem_drops is not None:
            metrics[metric.qdisc(role, link, "netem_drops")] = new.netem_drops - old.netem_drops
    return metrics


def _describe(qdisc: RootQdisc | None) -> str:
    return "none" if qdisc is None else f"{qdisc.kind} {qdisc.handle}"


def read(host: Host) -> str:
    return host.qdiscs()


class QdiscProbe(TrialProbe):
    kind = ProbeKind.QDISC

    def before(self, machines: Machines, context: ProbeContext) -> None:
        self.machines = machines
        self.names = context.names
        # A machine without tc (busybox) has its queues read by no one.
        self.roles = [role for role in machines.roles if machines.has(role, "tc")]
        self.before_text = read_each(self.roles, lambda role: read(machines.host(role)))
        #: role -> device -> its root qdisc after the traffic.
        self.roots: dict[str, dict[str, RootQdisc]] = {}

    def after(self) -> ProbeReading:
        after_text = read_each(self.roles, lambda role: read(self.machines.host(role)))
        metrics: dict[str, float] = {}
        for role in self.roles:
            before, after = parse_qdiscs(self.before_text[role]), parse_qdiscs(after_text[role])
            metrics |= qdisc_metrics(role, self.names, before, after)
            self.roots[role] = after
        raw = {
            "before": {r: json.loads(t) for r, t in self.before_text.items()},
            "after": {r: json.loads(t) for r, t in after_text.items()},
        }
        return ProbeReading(metrics, raw)
