"""What a running benchmark tells its user: trial k of N, the configuration, an ETA.

Three renderings of one event stream: lines for a person (the ETA learns from the
trials already run), JSON lines for a program (``--json``), or nothing (``--quiet``).
"""

import json
import sys
import time
from typing import Any, TextIO

from tunnelbench.plan import Trial, TrialConfig
from tunnelbench.planfile import TRIAL_OVERHEAD_S
from tunnelbench.units import mbit


def describe(config: TrialConfig) -> str:
    """A short label for a configuration: the tunnel and what differs from defaults."""
    c = config
    parts = [c.tunnel.kind.value]
    if c.tunnel.mtu:
        parts.append(f"mtu {c.tunnel.mtu}")
    if c.tunnel.cpu_budget:
        parts.append(f"{c.tunnel.cpu_budget:.0%} core")
    parts.append(f"{c.traffic.streams} stream{'s' if c.traffic.streams > 1 else ''}")
    parts.append(c.traffic.direction.value)
    if c.traffic.protocol.value != "tcp":
        parts.append(c.traffic.protocol.value)
    if c.lab.wan.rate:
        parts.append(f"wan {mbit(c.lab.wan.rate):g}M")
    if c.lab.wan.queue:
        parts.append(f"{c.lab.wan.queue.value} {c.lab.wan.queue_limit}")
    return ", ".join(parts)


class Progress:
    """The silent rendering; the base of the others."""

    def run_started(self, run_id: int, total: int, pending: list[Trial]) -> None:
        """``pending`` are the trials this invocation runs (fewer than ``total`` when
        resuming)."""

    def trial_started(self, trial: Trial) -> None: ...

    def trial_finished(self, trial: Trial, status: str, detail: str, goodput: float | None) -> None:
        """``detail`` is the error of a failed trial or the reason a trial was skipped."""

    def run_finished(self, run_id: int, status: str) -> None: ...


class LineProgress(Progress):
    """One line per trial: ``[k/N] configuration, run r ... 941 Mbit/s  (ETA 3m 10s)``."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.total = 0
        self.remaining: list[Trial] = []
        self.spent = 0.0  # wall time of the trials run so far, beyond their traffic
        self.measured = 0
        self.started = 0.0

    def run_started(self, run_id: int, total: int, pending: list[Trial]) -> None:
        self.total = total
        self.remaining = pending
        done = total - len(pending)
        resumed = f", resuming after {done} stored" if done else ""
        print(f"run {run_id}: {len(pending)} trial(s) to run{resumed}", file=self.out, flush=True)

    def trial_started(self, trial: Trial) -> None:
        self.started = time.monotonic()
        what = f"[{trial.seq}/{self.total}] {describe(trial.config)}, run {trial.repetition}"
        print(f"{what} ...", end="", file=self.out, flush=True)

    def trial_finished(self, trial: Trial, status: str, detail: str, goodput: float | None) -> None:
        if status == "skipped":
            print(f"[{trial.seq}/{self.total}] skipped: {detail}", file=self.out, flush=True)
            return
        traffic = trial.config.traffic.duration + trial.config.traffic.warmup
        self.spent += time.monotonic() - self.started - traffic
        self.measured += 1
        result = f" {mbit(goodput):,.0f} Mbit/s" if goodput is not None else f" FAILED: {detail}"
        print(f"{result}{self._eta(trial)}", file=self.out, flush=True)

    def _eta(self, current: Trial) -> str:
        overhead = self.spent / self.measured if self.measured else TRIAL_OVERHEAD_S
        left = [t for t in self.remaining if t.seq > current.seq]
        seconds = sum(t.config.traffic.duration + t.config.traffic.warmup + overhead for t in left)
        return f"  (ETA {format_duration(seconds)})" if left else ""

    def run_finished(self, run_id: int, status: str) -> None:
        if status != "complete":
            print(f"run {run_id} {status}", file=self.out, flush=True)


class JsonProgress(Progress):
    """One JSON object per line and event, for programs that drive tunnelbench."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out

    def _emit(self, event: str, **fields: Any) -> None:
        print(json.dumps({"event": event, **fields}), file=self.out, flush=True)

    def run_started(self, run_id: int, total: int, pending: list[Trial]) -> None:
        self._emit("run_started", run_id=run_id, trials=total, pending=len(pending))

    def trial_started(self, trial: Trial) -> None:
        self._emit(
            "trial_started",
            seq=trial.seq,
            repetition=trial.repetition,
            configuration=describe(trial.config),
        )

    def trial_finished(self, trial: Trial, status: str, detail: str, goodput: float | None) -> None:
        self._emit(
            "trial_finished",
            seq=trial.seq,
            status=status,
            detail=detail or None,
            goodput_bps=goodput,
        )

    def run_finished(self, run_id: int, status: str) -> None:
        self._emit("run_finished", run_id=run_id, status=status)


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
