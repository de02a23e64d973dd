"""tunnelbench inside a VM guest: ``python -m tunnelbench.cli.guest EXCHANGE``.

Reads the job the host wrote into the exchange directory and either runs trials (each
one's record appended to the events file as soon as it is finished, so a guest that dies
keeps what it did) or collects ``doctor``'s report on the guest's kernel. The guest has
no store of its own: SQLite on the 9p share fails, and the run belongs to the host's.
"""

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import IO, Any

from tunnelbench.bench import environment, runner
from tunnelbench.bench.labpool import KEEP, LabPool
from tunnelbench.bench.progress import Progress
from tunnelbench.bench.testbeds.lab import LabTestbed
from tunnelbench.cli import doctor
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, Trial, TrialConfig
from tunnelbench.model.records import Resolved, TrialStatus, Where
from tunnelbench.system.command import run
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.vm.machine import EVENTS, IN_GUEST, JOB


class EventSink:
    """Where a trial's record goes in the guest: one JSON line on the exchange
    directory, flushed and synced, in the form :meth:`Store.add_trial` takes."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def emit(self, event: str, **fields: Any) -> None:
        # ``at``: the guest's clock, by which the host maps the guest's trial windows
        # to its own time (tunnelbench.probes.vmhost).
        self.stream.write(json.dumps({"event": event, "at": time.time(), **fields}) + "\n")
        self.stream.flush()
        os.fsync(self.stream.fileno())

    def add_trial(
        self,
        run_id: int,
        *,
        config: TrialConfig,
        resolved: Resolved,
        status: TrialStatus,
        **fields: Any,
    ) -> int:
        record = {
            **fields,
            "config": config.to_dict(),
            "resolved": resolved.to_dict(),
            "status": status.value,
        }
        self.emit("trial", trial=record)
        return 0


class EventProgress(Progress):
    """Tells the host when a trial starts, so its display follows the guest."""

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink

    def trial_started(self, trial: Trial) -> None:
        self.sink.emit("started", seq=trial.seq)


def main(exchange: Path) -> int:
    job = json.loads((exchange / JOB).read_text())
    os.environ.update(job.get("env", {}))
    os.environ[IN_GUEST] = "1"
    # The host's -v: every command the guest runs, with the guest's seconds since start,
    # into its output (the exchange directory's guest.log).
    logging.basicConfig(
        level=logging.DEBUG if job.get("verbose") else logging.WARNING,
        format="%(relativeCreated)8.0f ms %(name)s: %(message)s",
    )
    # /dev/net/tun and /dev/ppp exist only once tun and ppp_generic are loaded (opening
    # them does not load them).
    for module in ("tun", "ppp_generic"):
        run(["modprobe", module], check=False, timeout=30)
    with (exchange / EVENTS).open("a") as stream:
        sink = EventSink(stream)
        sink.emit("ready", release=os.uname().release, uptime_s=_uptime())
        if "trials" in job:
            sink.emit("environment", facts=_environment(job).to_dict())
        if job.get("doctor"):
            sink.emit("doctor", report=doctor.collect().to_json())
        else:
            _run_trials(job, sink)
        sink.emit("done")
    return 0


def _run_trials(job: dict[str, Any], sink: EventSink) -> None:
    experiment = Experiment.from_dict(job["experiment"])
    trials = [
        Trial(t["seq"], t["repetition"], TrialConfig.from_dict(t["config"])) for t in job["trials"]
    ]
    resolutions, skipped = runner.check(trials)
    prepared = runner.Prepared(experiment, trials, resolutions, skipped)
    labs = LabPool(keep=0 if experiment.fresh_labs else KEEP)
    with LabTestbed(labs, Where.from_dict(job["machine"])) as lab:
        runner.run_trials(prepared, sink, 0, trials, EventProgress(sink), lab)


def _environment(job: dict[str, Any]) -> Environment:
    """The guest's kernel, CPU and capabilities, as a run records its machine's."""
    versions = {}
    for item in job["trials"]:
        config = TrialConfig.from_dict(item["config"])
        versions[config.traffic.generator.value] = GENERATORS.get(
            config.traffic.generator
        ).version()
    return environment.describe(versions)


def _uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
