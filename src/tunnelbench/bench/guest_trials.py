"""Trials on another kernel: one VM boot for a run's trials of one kernel and guest
size, each trial stored in the run as soon as the guest reports it.

The guest runs the same runner on the same files (:mod:`tunnelbench.cli.guest`); what it
sends back is exactly what :meth:`Store.add_trial` takes, with what the host did over
each trial's measured window added (:mod:`tunnelbench.probes.vmhost`: the guest cannot
see its host's contention). When the guest dies or hangs,
its finished trials are kept and the rest are stored as failed with the reason, and the
run goes on; Ctrl-C stops the guest and leaves no QEMU and no exchange directory.
"""

import logging
import os
import time
from dataclasses import replace
from typing import Any

from tunnelbench.bench.capabilities import guest_preload
from tunnelbench.bench.doctor_report import Report, VmRun
from tunnelbench.bench.progress import Progress
from tunnelbench.bench.sink import store_trial
from tunnelbench.bench.store import Store
from tunnelbench.errors import LabError
from tunnelbench.model import metrics as metric
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, Trial, TrialConfig, VmSettings
from tunnelbench.model.records import Resolved, TrialStatus, Where
from tunnelbench.probes import vmhost
from tunnelbench.vm import machine
from tunnelbench.vm.kernels import Kernel

log = logging.getLogger("tunnelbench.bench.guest_trials")

#: Seconds a guest may stay silent during a trial beyond the trial's own length: lab
#: set-up and teardown under emulation take tens of seconds.
TRIAL_SLACK_S = 240.0
#: Variables the guest needs from this process (where the project's tools are).
PASSED_ENV = ("TUNNELBENCH_TOOLS_DIR", "PATH")


def run(
    experiment: Experiment,
    store: Store,
    run_id: int,
    kernel: Kernel,
    vm: VmSettings,
    trials: list[Trial],
    progress: Progress,
) -> None:
    """Run ``trials`` (all on ``kernel`` in a guest of size ``vm``) in one boot, storing
    each as the guest reports it; what the guest did not finish is stored as failed."""
    accel = machine.accel(kernel, vm)
    where = _where(kernel, vm, accel)
    job = {
        "experiment": experiment.to_dict(),
        "trials": [
            {"seq": t.seq, "repetition": t.repetition, "config": t.config.to_dict()} for t in trials
        ],
        "machine": where.to_dict(),
        "env": {name: os.environ[name] for name in PASSED_ENV if name in os.environ},
        "verbose": log.isEnabledFor(logging.DEBUG),
    }
    by_seq = {t.seq: t for t in trials}
    done: set[int] = set()
    longest = max(t.config.traffic.duration + t.config.traffic.longest_warmup for t in trials)
    reason: str | None = None
    clock = vmhost.Clock()
    with machine.Guest(kernel, vm, job, accel, preload=guest_preload()) as guest:
        log.debug("guest exchange directory %s", guest.exchange)
        assert guest.pid is not None
        watch = vmhost.HostWatch(guest.pid)
        watch.start()
        try:
            for event in guest.events(idle_timeout=longest + TRIAL_SLACK_S):
                clock.saw(event)
                if event["event"] == "ready":
                    log.info("guest %s up after %.1f s", event["release"], event["uptime_s"])
                elif event["event"] == "environment":
                    facts = Environment.from_dict(event["facts"]).with_keys(**where.to_dict())
                    store.add_guest_environment(run_id, kernel.spec, facts)
                elif event["event"] == "started":
                    progress.trial_started(by_seq[event["seq"]])
                elif event["event"] == "trial":
                    record = _store(store, run_id, with_host(event["trial"], watch, clock))
                    done.add(record["seq"])
                    progress.trial_finished(
                        by_seq[record["seq"]],
                        TrialStatus(record["status"]),
                        record.get("error") or "",
                        record["metrics"].get(metric.GOODPUT.name),
                    )
            code = guest.exit_code()
            if code != 0 or len(done) < len(trials):
                reason = (
                    f"the VM running kernel {kernel.release} stopped"
                    f" {'with exit code ' + str(code) if code is not None else 'without finishing'}"
                    f" ({guest.console_tail()})"
                )
        except LabError as exc:
            reason = str(exc)
        finally:
            watch.stop()
            log.debug("the guest's output:\n%s", guest.output())
    if reason is not None:
        for trial in trials:
            if trial.seq not in done:
                _store_failed(store, run_id, trial, reason, where)
                progress.trial_finished(trial, TrialStatus.FAILED, reason, None)


def with_host(
    record: dict[str, Any], watch: vmhost.HostWatch, clock: vmhost.Clock
) -> dict[str, Any]:
    """A guest's trial record with what its host did over the trial's measured window:
    ``vmhost.*`` metrics and the busiest outside processes (``artifacts.vmhost``). A
    record without a window (failed, or recorded before the probes) is left as it is."""
    window = vmhost.guest_window(record)
    if record.get("status") != TrialStatus.OK.value or window is None:
        return record
    begin, end = (clock.to_host(edge) for edge in window)
    if begin is None or end is None:
        return record
    host = watch.window(begin, end)
    if host is None:
        log.debug("the host's samples do not cover trial %s's window", record.get("seq"))
        return record
    facts = host.to_dict() | {
        "clock_offset_s": round(clock.offset or 0.0, 3),
        "watch_cpu_s": round(watch.cost_s, 3),
    }
    artifacts = (record.get("artifacts") or {}) | {"vmhost": facts}
    return record | {"metrics": record["metrics"] | host.metrics(), "artifacts": artifacts}


def _store(store: Store, run_id: int, record: dict[str, Any]) -> dict[str, Any]:
    fields = dict(record)
    store.add_trial(
        run_id,
        seq=fields["seq"],
        repetition=fields["repetition"],
        config_key=fields["config_key"],
        config=TrialConfig.from_dict(fields["config"]),
        resolved=Resolved.from_dict(fields["resolved"]),
        status=TrialStatus(fields["status"]),
        error=fields["error"],
        started_at=fields["started_at"],
        metrics=fields["metrics"],
        artifacts=fields["artifacts"],
    )
    return fields


def _store_failed(store: Store, run_id: int, trial: Trial, reason: str, where: Where) -> None:
    resolved = Resolved()
    resolved.record_where(where)
    store_trial(
        store, run_id, trial, resolved=resolved, status=TrialStatus.FAILED,
        error=reason, started_at=time.time(), metrics={}, artifacts={},
    )  # fmt: skip


def doctor(kernel: Kernel, vm: VmSettings) -> Report:
    """``doctor``'s report collected in a guest on ``kernel``, with how the guest ran."""
    accel = machine.accel(kernel, vm)
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    job = {"doctor": True, "env": env}
    with machine.Guest(kernel, vm, job, accel, preload=guest_preload()) as guest:
        began = time.monotonic()
        for event in guest.events(idle_timeout=machine.BOOT_TIMEOUT_S):
            if event["event"] == "ready":
                booted = event["uptime_s"]
                up = time.monotonic() - began
            elif event["event"] == "doctor":
                ran = VmRun(_where(kernel, vm, accel), accel.reason, booted, up)
                return replace(Report.from_json(event["report"]), vm=ran)
        raise LabError(
            f"the VM running kernel {kernel.release} stopped before its report"
            f" ({guest.console_tail()})"
        )


def _where(kernel: Kernel, vm: VmSettings, accel: machine.Accel) -> Where:
    """What every trial in such a guest records about where it ran."""
    return Where(
        kernel_release=kernel.release, virtualization=accel.mode,
        kernel_package=kernel.package_line(), virtualization_reason=accel.reason or None,
        vm_cpus=vm.cpus, vm_memory_mib=vm.memory,
    )  # fmt: skip
