"""Stored runs for report tests: the recorded fixture runs, and a 50-configuration run.

The recorded runs (``tests/fixtures/runs/*.db``) are copied before they are opened:
opening a store may write to it (schema check, journal mode).

The wide run exists to check that reports stay legible with 50 configurations. Its
numbers are the recorded trials of the L2-tunnel run, re-labelled with 50 configurations
(2 tunnels x 5 MTUs x 5 stream counts); they are real measurements, but not of those
configurations.
"""

import shutil
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
            by_kind.setdefault(trial.config["tunnel"]["kind"], []).append(trial)
    store = Store(directory / "wide.db")
    run_id = store.start_run(
        "tunnelbench run wide.toml", {**run.experiment, "name": "wide"}, run.environment
    )
    seq = 0
    for kind in ("none", "vxlan"):
        template = by_kind[kind][0].config
        for mtu in mtus:
            for streams in (1, 2, 4, 8, 16):
                config = TrialConfig.from_dict(template).to_dict()
                config["lab"]["lan_mtu"] = mtu
                config["lab"]["wan"]["mtu"] = mtu + 50
                config["tunnel"]["mtu"] = mtu if kind == "vxlan" else None
                config["traffic"]["streams"] = streams
                key = TrialConfig.from_dict(config).key()
                for repetition in (1, 2, 3):
                    trial = by_kind[kind][seq % len(by_kind[kind])]
                    seq += 1
                    store.add_trial(
                        run_id, seq=seq, repetition=repetition, config_key=key,
                        config=config, resolved=Resolved.from_dict(
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
