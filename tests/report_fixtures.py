"""Stored runs for report tests: the recorded fixture runs, and a 50-configuration run.

The recorded runs (``tests/fixtures/runs/*.db``) are copied before they are opened:
opening a store may write to it (schema check, journal mode).

The wide run exists to check that reports stay legible with 50 configurations. Its
numbers are the recorded trials of the L2-tunnel run, re-labelled with 50 configurations
(2 tunnels x 5 MTUs x 5 stream counts); they are real measurements, but not of those
configurations.
"""

import re
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tests.conftest import FIXTURES
from tunnelbench.bench.backfill import backfill
from tunnelbench.bench.store import Store
from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.records import Resolved, RunStatus, TrialStatus
from tunnelbench.tunnels import REGISTRY as TUNNELS

RUNS = FIXTURES / "runs"
RECORDED = ("l2-tunnel-mtu", "queue-comparison")


def recorded(name: str, directory: Path) -> Store:
    """A private copy of a recorded run's database, opened."""
    copy = directory / f"{name}.db"
    shutil.copyfile(RUNS / f"{name}.db", copy)
    return Store.open_existing(copy)


def wide(directory: Path, mtus: tuple[int, ...] = (1280, 1500, 4000, 6000, 9000)) -> Store:
    """A complete run of 2 x len(mtus) x 5 configurations, 3 runs each."""
    source = recorded("l2-tunnel-mtu", directory)
    run = source.run("latest")
    by_kind: dict[str, list] = {}
    for trial in source.trials(run.id):
        if trial.status == "ok":
            by_kind.setdefault(trial.config.tunnel.kind, []).append(trial)
    store = Store(directory / "wide.db")
    run_id = store.start_run(
        "tunnelbench run wide.toml", replace(run.experiment, name="wide"), run.environment
    )
    seq = 0
    for kind in ("none", "vxlan"):
        template = by_kind[kind][0].config
        for mtu in mtus:
            for streams in (1, 2, 4, 8, 16):
                config = template.to_dict()
                config["lab"]["lan_mtu"] = mtu
                config["lab"]["wan"]["mtu"] = mtu + 50
                config["tunnel"]["mtu"] = mtu if kind == "vxlan" else None
                config["traffic"]["streams"] = streams
                settings = TrialConfig.from_dict(config)
                for repetition in (1, 2, 3):
                    trial = by_kind[kind][seq % len(by_kind[kind])]
                    seq += 1
                    store.add_trial(
                        run_id, seq=seq, repetition=repetition, config_key=settings.key(),
                        config=settings, resolved=Resolved.from_dict(
                            trial.resolved.to_dict(facts=False)
                            | {"tunnel_mtu": mtu if kind == "vxlan" else None}),
                        status=TrialStatus.OK, error=None,
                        started_at=0.0, metrics=trial.metrics,
                        artifacts={"intervals": source.artifact(trial.id, "intervals")},
                    )  # fmt: skip
    store.finish_run(run_id, RunStatus.COMPLETE)
    source.close()
    return store


def resolved_for(config: TrialConfig, data: dict[str, Any]) -> Resolved:
    """A trial's resolved record as an old database stored ``data`` (the kind's first
    implementation when it names none), with the facts its kind declares filled in as
    the store fills them."""
    implementation = data.get("tunnel_implementation")
    if implementation is None:
        implementation = TUNNELS.get(config.tunnel.kind).implementations[0]
    return backfill(config, Resolved.from_dict({"tunnel_implementation": implementation} | data))


@dataclass(frozen=True)
class Tick:
    x: float
    y: float
    label: str


AXIS_ID = re.compile(r"matplotlib\.axis_\d+$")
TICK_ID = re.compile(r"([xy])tick_\d+$")


def drawn_axes(svg: str) -> list[tuple[str, list[Tick]]]:
    """Each axis of a chart as its renderer drew it (matplotlib's SVG, in a page or as
    the browser serialised it): its direction and its labelled ticks, in drawing order."""
    root = ET.fromstring(svg)
    found = []
    for axis in root.iter("g"):
        if not AXIS_ID.search(axis.get("id", "")):
            continue
        direction, ticks = "", []
        for group in axis:
            match = TICK_ID.search(group.get("id", ""))
            text = next(group.iter("text"), None) if match else None
            if match is None or text is None:
                continue
            direction = match.group(1)
            label = "".join(text.itertext()).strip()
            ticks.append(Tick(float(text.get("x", 0)), float(text.get("y", 0)), label))
        if ticks:
            found.append((direction, ticks))
    return found


NUMBER = re.compile(r"[\u2212-]?[\d,]*\.?\d+")


def unreadable(svg: str) -> list[str]:
    """The axes of a chart whose labels repeat, or, on a value axis, are out of order (a
    sub-millisecond axis once read ``0 0 0 0 0``)."""
    bad = []
    for direction, ticks in drawn_axes(svg):
        labels = [t.label for t in ticks]
        ordered = True
        if all(NUMBER.fullmatch(label) for label in labels):
            values = [float(label.replace(",", "").replace("\u2212", "-")) for label in labels]
            ordered = values == sorted(values)
        if len(set(labels)) < len(labels) or not ordered:
            bad.append(f"{direction}: {' '.join(labels)}")
    return bad
