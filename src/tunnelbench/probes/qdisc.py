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

from tunnelbench.analysis.steadiness import QueueSeries, queue_window
from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.model import metrics as metric
from tunnelbench.probes import backlog
from tunnelbench.probes.devices import PPP, WAN, DeviceNames
from tunnelbench.probes.trial import (
    Machines,
    ProbeContext,
    ProbeKind,
    ProbeReading,
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


class QdiscProbe(backlog.WatchingProbe):
    """The root qdiscs' counters before and after the traffic, and the WAN queues'
    backlog read through it (:mod:`tunnelbench.probes.backlog`): the warm-up's evidence
    while it runs (:meth:`queue_readings`), the window's afterwards
    (``qdisc.<role>.<link>.window_*``, :func:`window_metrics`)."""

    kind = ProbeKind.QDISC

    def before(self, machines: Machines, context: ProbeContext) -> None:
        self.machines = machines
        self.names = context.names
        self.duration = context.traffic.duration
        # A machine without tc (busybox) has its queues read by no one.
        self.roles = [role for role in machines.roles if machines.has(role, "tc")]
        self.before_text = read_each(self.roles, lambda role: read(machines.host(role)))
        #: role -> device -> its root qdisc after the traffic.
        self.roots: dict[str, dict[str, RootQdisc]] = {}
        self.watching(_watch(machines, self.names, self.before_text), self.duration)

    def after(self) -> ProbeReading:
        series = self.stopped()
        after_text = read_each(self.roles, lambda role: read(self.machines.host(role)))
        metrics: dict[str, float] = {}
        for role in self.roles:
            before, after = parse_qdiscs(self.before_text[role]), parse_qdiscs(after_text[role])
            metrics |= qdisc_metrics(role, self.names, before, after)
            self.roots[role] = after
        raw: dict[str, Any] = {
            "before": {r: json.loads(t) for r, t in self.before_text.items()},
            "after": {r: json.loads(t) for r, t in after_text.items()},
        }
        if series:
            raw["backlog"] = backlog.raw(series, self.window)
            if self.window is not None:
                metrics |= window_metrics(series, self.window, self.duration)
        return ProbeReading(metrics, raw)


def wan_queues(names: DeviceNames, role: str, roots: Mapping[str, RootQdisc]) -> dict[str, str]:
    """``role.link`` -> device of the WAN's queues among one role's root qdiscs: the
    queues the lab shapes (its veth ends and, over PPPoE, its ppp devices)."""
    found = {}
    for device in sorted(roots):
        link = names.name(role, device)
        if link in (WAN, PPP):
            found[f"{role}.{link}"] = device
    return found


def _watch(
    machines: Machines, names: DeviceNames, before: Mapping[str, str]
) -> backlog.BacklogWatch | None:
    """A watch of the WAN's queues (as ``before``, each role's qdiscs before the traffic,
    shows them) on the roles read in this process; None where there is none."""
    queues: dict[str, tuple[str, str]] = {}
    for role, text in before.items():
        if machines.host(role).reads_in_process:
            found = wan_queues(names, role, parse_qdiscs(text))
            queues |= {name: (role, device) for name, device in found.items()}
    if not queues:
        return None

    def read_role(role: str) -> dict[str, dict[str, int]]:
        return {dev: q.values for dev, q in parse_qdiscs(read(machines.host(role))).items()}

    return backlog.BacklogWatch(queues, read_role)


def window_metrics(
    series: QueueSeries, window: tuple[float, float], duration_s: float
) -> dict[str, float]:
    """Per watched queue over the measured window (:func:`queue_window`):
    ``window_first_bytes`` and ``window_last_bytes``, its mean backlog over the
    window's first and last third; ``window_standing``, 1 when it was never empty (the
    bottleneck held a queue); ``window_filling``, 1 when its backlog still rose with no
    drop since the traffic began."""
    metrics: dict[str, float] = {}
    for name, readings in series.items():
        found = queue_window(name, readings, window, duration_s)
        if found is None:
            continue
        role, link = name.split(".", 1)
        metrics[metric.qdisc(role, link, "window_first_bytes")] = round(found.first)
        metrics[metric.qdisc(role, link, "window_last_bytes")] = round(found.last)
        metrics[metric.qdisc(role, link, "window_standing")] = float(found.standing)
        metrics[metric.qdisc(role, link, "window_filling")] = float(found.filling)
    return metrics
