"""What a running benchmark tells its user: trial k of N, the configuration, an ETA.

Four renderings of one event stream: lines for a person (the ETA counts each trial's
traffic and an overhead by kind, host or VM and lab built or kept: the mean of the
trials of that kind already run, before them this machine's learned figure or the
reference machine's, :mod:`tunnelbench.bench.learned`, and a boot per guest not yet
started), the same lines with a live status line on a terminal (the current
trial's seconds, the run's ETA, the configuration's last figure), JSON lines for a
program (``--json``), or nothing (``--quiet``).
In a run with adaptive repetitions N grows: the lines show it as ``[k/N+]`` while more
rounds may come, and each added round is announced with the configurations it repeats
and their current precision (``round_added`` in JSON).
"""

import json
import os
import statistics
import sys
import threading
import time
from typing import Any, TextIO

from tunnelbench.analysis.precision import Precision
from tunnelbench.bench.planfile import REFERENCE, Overheads, labs_built
from tunnelbench.kinds import Cipher, Generator, Protection, Protocol, Queue
from tunnelbench.model.plan import Trial, TrialConfig
from tunnelbench.model.records import RunStatus, TrialStatus
from tunnelbench.model.wan import format_pct, format_us
from tunnelbench.units import mbit


def describe(config: TrialConfig) -> str:
    """A short label for a configuration: the tunnel and what differs from defaults."""
    c = config
    parts = [c.tunnel.kind.value]
    if c.tunnel.protection is not Protection.NONE:
        parts[0] += f"+{c.tunnel.protection.value}"
    if c.tunnel.implementation is not None:
        parts.append(c.tunnel.implementation)
    if c.tunnel.cipher is not Cipher.AUTO:
        parts.append(c.tunnel.cipher.value)
    if c.tunnel.mtu:
        parts.append(f"mtu {c.tunnel.mtu}")
    if c.tunnel.cpu_budget:
        parts.append(f"{c.tunnel.cpu_budget:.0%} core")
    parts.append(f"{c.traffic.streams} stream{'s' if c.traffic.streams > 1 else ''}")
    parts.append(c.traffic.direction.value)
    if c.traffic.protocol is not Protocol.TCP:
        parts.append(c.traffic.protocol.value)
    if c.traffic.generator is not Generator.IPERF3:  # the default goes unsaid
        parts.append(c.traffic.generator.value)
    if c.lab.wan.rate:
        parts.append(f"wan {mbit(c.lab.wan.rate):g}M")
    if c.lab.wan.queue:
        # A byte FIFO's limit is its bytes (its packet limit is not used).
        held = c.lab.wan.queue_bytes
        limit = f"{held:,} bytes" if c.lab.wan.queue is Queue.BFIFO and held else None
        parts.append(f"{c.lab.wan.queue.value} {limit or c.lab.wan.queue_limit}")
    if c.lab.wan.delay:
        jitter = f"±{format_us(c.lab.wan.jitter)}" if c.lab.wan.jitter else ""
        parts.append(f"delay {format_us(c.lab.wan.delay)}{jitter}")
    if c.lab.wan.loss:
        parts.append(f"loss {format_pct(c.lab.wan.loss)}")
    if c.lab.wan.reorder:
        parts.append(f"reorder {format_pct(c.lab.wan.reorder)}")
    return ", ".join(parts)


class Progress:
    """The silent rendering; the base of the others."""

    def run_started(
        self, run_id: int, total: int, pending: list[Trial], *, growing: bool = False
    ) -> None:
        """``pending`` are the trials this invocation runs (fewer than ``total`` when
        resuming); ``growing``: adaptive repetitions may add rounds to ``total``."""

    def trial_started(self, trial: Trial) -> None: ...

    def round_added(
        self, trials: list[Trial], standing: dict[str, Precision], target_pct: float
    ) -> None:
        """Adaptive repetitions added a round of ``trials``: the configurations whose
        median is not yet within ``target_pct`` (``standing`` by config key)."""

    def precision_final(
        self, standing: list[tuple[TrialConfig, Precision]], target_pct: float
    ) -> None:
        """Adaptive repetitions are done: where every configuration ended."""

    def trial_finished(
        self, trial: Trial, status: TrialStatus, detail: str, goodput: float | None
    ) -> None:
        """``detail`` is the error of a failed trial or the reason a trial was skipped."""

    def run_finished(self, run_id: int, status: RunStatus) -> None: ...


class LineProgress(Progress):
    """One line per trial: ``[k/N] configuration, run r ... 941 Mbit/s  (ETA 3m 10s)``."""

    def __init__(self, out: TextIO | None = None, overheads: Overheads = REFERENCE) -> None:
        # Standard output as the command set it up (its write errors name it), read
        # when the display is made: a default bound at import would outlive it.
        self.out = out or sys.stdout
        self.overheads = overheads
        self.total = 0
        self.remaining: list[Trial] = []
        self.built: dict[int, bool] = {}  # seq -> whether its lab is built for it
        # overhead kind (an Overheads field) -> each finished trial's wall time beyond
        # its traffic
        self.spent: dict[str, list[float]] = {}
        self.booted: set[object] = set()  # the guests that have started a trial
        self.started = 0.0
        self.growing = False

    def run_started(
        self, run_id: int, total: int, pending: list[Trial], *, growing: bool = False
    ) -> None:
        self.total = total
        self.remaining = pending
        self.built = {t.seq: new for t, new in zip(pending, labs_built(pending), strict=True)}
        self.growing = growing
        done = total - len(pending)
        resumed = f", resuming after {done} stored" if done else ""
        more = ", more if a configuration's median is not precise enough" if growing else ""
        print(
            f"run {run_id}: {len(pending)} trial(s) to run{resumed}{more}",
            file=self.out,
            flush=True,
        )

    def _position(self, trial: Trial) -> str:
        return f"[{trial.seq}/{self.total}{'+' if self.growing else ''}]"

    def trial_started(self, trial: Trial) -> None:
        self._start(trial)
        what = f"{self._position(trial)} {describe(trial.config)}, run {trial.repetition}"
        print(f"{what} ...", end="", file=self.out, flush=True)

    def _start(self, trial: Trial) -> None:
        self.started = time.monotonic()
        if (guest := _guest(trial)) is not None:
            self.booted.add(guest)

    def _kind(self, trial: Trial) -> str:
        """The trial's overhead kind: ``built_s``, ``kept_s``, ``vm_built_s`` or ``vm_kept_s``
        (a round added later finds its lab kept)."""
        built = self.built.get(trial.seq, False)
        return ("vm_" if trial.config.lab.in_vm else "") + ("built_s" if built else "kept_s")

    def _overhead(self, trial: Trial) -> float:
        seen = self.spent.get(self._kind(trial))
        return statistics.mean(seen) if seen else float(getattr(self.overheads, self._kind(trial)))

    def round_added(
        self, trials: list[Trial], standing: dict[str, Precision], target_pct: float
    ) -> None:
        self.total += len(trials)
        self.remaining = self.remaining + trials
        figures = "; ".join(
            f"{describe(t.config)} {standing[t.config.key()].figure()}" for t in trials
        )
        print(
            f"round {trials[0].repetition}: {len(trials)} more trial(s), not yet within"
            f" ±{target_pct:g}%: {figures}",
            file=self.out,
            flush=True,
        )

    def trial_finished(
        self, trial: Trial, status: TrialStatus, detail: str, goodput: float | None
    ) -> None:
        if status is TrialStatus.SKIPPED:
            print(f"{self._position(trial)} skipped: {detail}", file=self.out, flush=True)
            return
        traffic = trial.config.traffic.duration + trial.config.expected_warmup
        spent = time.monotonic() - self.started - traffic
        self.spent.setdefault(self._kind(trial), []).append(spent)
        result = f" {mbit(goodput):,.0f} Mbit/s" if goodput is not None else f" FAILED: {detail}"
        print(f"{result}{self._eta(trial)}", file=self.out, flush=True)

    def _eta(self, current: Trial, elapsed: float | None = None) -> str:
        """The time the trials after ``current`` will take; with ``elapsed`` (seconds
        into ``current``, still running), what is left of it too."""
        left = [t for t in self.remaining if t.seq > current.seq]
        seconds = sum(
            t.config.traffic.duration + t.config.expected_warmup + self._overhead(t) for t in left
        )
        unbooted = {g for t in left if (g := _guest(t)) is not None} - self.booted
        seconds += self.overheads.vm_boot_s * len(unbooted)
        if elapsed is not None:
            traffic = current.config.traffic.duration + current.config.expected_warmup
            seconds += max(0.0, traffic + self._overhead(current) - elapsed)
        return f"  (ETA {format_duration(seconds)})" if left or elapsed is not None else ""

    def run_finished(self, run_id: int, status: RunStatus) -> None:
        if status is not RunStatus.COMPLETE:
            print(f"run {run_id} {status}", file=self.out, flush=True)


class LiveProgress(LineProgress):
    """:class:`LineProgress` on a terminal: while a trial runs, its line counts the
    seconds and shows the run's ETA and the configuration's figure from its last run;
    each finished trial leaves the same line the line mode prints (a log of the run)."""

    REFRESH_S = 0.5
    CLEAR = "\r\033[K"

    def __init__(
        self,
        out: TextIO | None = None,
        refresh_s: float = REFRESH_S,
        overheads: Overheads = REFERENCE,
    ) -> None:
        super().__init__(out, overheads)
        self.refresh_s = refresh_s
        self.last: dict[str, float] = {}  # config key -> goodput of its latest run
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._lock = threading.Lock()

    def trial_started(self, trial: Trial) -> None:
        self._start(trial)
        self._stop.clear()
        self._ticker = threading.Thread(
            target=self._tick, args=(trial,), name="tb-progress", daemon=True
        )
        self._ticker.start()

    def _status(self, trial: Trial, width: int = 10**6) -> str:
        """The live line in fewer than ``width`` characters (the last column would wrap
        on some terminals)."""
        traffic = trial.config.traffic.duration + trial.config.expected_warmup
        elapsed = time.monotonic() - self.started
        last = self.last.get(trial.config.key())
        return status_line(
            self._position(trial),
            describe(trial.config).split(", "),
            f"run {trial.repetition} ... {elapsed:.0f}/{traffic:.0f} s",
            self._eta(trial, elapsed).strip(),
            "" if last is None else f"last {mbit(last):,.0f} Mbit/s",
            width - 1,
        )

    def _tick(self, trial: Trial) -> None:
        while True:
            width = _width(self.out)
            with self._lock:
                if self._stop.is_set():
                    return
                print(f"{self.CLEAR}{self._status(trial, width)}", end="", file=self.out,
                      flush=True)  # fmt: skip
            if self._stop.wait(self.refresh_s):
                return

    def _halt(self) -> None:
        with self._lock:
            self._stop.set()
            print(self.CLEAR, end="", file=self.out, flush=True)
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None

    def trial_finished(
        self, trial: Trial, status: TrialStatus, detail: str, goodput: float | None
    ) -> None:
        if status is not TrialStatus.SKIPPED:
            self._halt()
            what = f"{self._position(trial)} {describe(trial.config)}, run {trial.repetition}"
            print(f"{what} ...", end="", file=self.out)
        super().trial_finished(trial, status, detail, goodput)
        if goodput is not None:
            self.last[trial.config.key()] = goodput

    def run_finished(self, run_id: int, status: RunStatus) -> None:
        if self._ticker is not None:  # interrupted mid-trial: leave a clean line
            self._halt()
            print(file=self.out, flush=True)
        super().run_finished(run_id, status)


def status_line(
    position: str, described: list[str], clock: str, eta: str, last: str, limit: int
) -> str:
    """``[k/N] configuration, run r ... 3/10 s  (ETA 2m 10s)  last 941 Mbit/s`` in at most
    ``limit`` characters. It shortens by whole fields, never inside a figure or a unit:
    the last figure goes first, then the ETA, then the configuration's items from its
    end (an ellipsis says some are missing); the position and the trial's seconds stay.
    """
    extras = [e for e in (eta, last) if e]
    shown = len(described)
    while True:
        items = described[:shown] + (["…"] if shown < len(described) else [])
        line = "  ".join([f"{position} {', '.join(items)}, {clock}", *extras])
        if len(line) <= limit:
            return line
        if extras:
            extras.pop()
        elif shown > 1:
            shown -= 1
        else:
            return f"{position} {clock}"


def _width(out: TextIO) -> int:
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


def _guest(trial: Trial) -> object | None:
    """The guest a trial runs in (one boot per kernel and guest size), or None."""
    lab = trial.config.lab
    return (lab.kernel, lab.vm) if lab.in_vm else None


def for_terminal(out: TextIO | None = None, overheads: Overheads = REFERENCE) -> LineProgress:
    """Live progress on a terminal that can redraw a line; plain lines otherwise (a
    file, a pipe, a CI log, ``TERM=dumb``). ``overheads``: what a trial costs here
    besides its traffic, until trials of its kind have run."""
    out = out or sys.stdout
    if out.isatty() and os.environ.get("TERM") != "dumb":
        return LiveProgress(out, overheads=overheads)
    return LineProgress(out, overheads)


class JsonProgress(Progress):
    """One JSON object per line and event, for programs that drive tunnelbench."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def _emit(self, event: str, **fields: Any) -> None:
        print(json.dumps({"event": event, **fields}), file=self.out, flush=True)

    def run_started(
        self, run_id: int, total: int, pending: list[Trial], *, growing: bool = False
    ) -> None:
        self._emit(
            "run_started", run_id=run_id, trials=total, pending=len(pending), adaptive=growing
        )

    def round_added(
        self, trials: list[Trial], standing: dict[str, Precision], target_pct: float
    ) -> None:
        """``trials`` is the new total; each added trial with its configuration's
        precision so far."""
        self._emit(
            "round_added",
            repetition=trials[0].repetition,
            trials=trials[-1].seq,  # seqs are contiguous: the last one is the total
            added=len(trials),
            target_pct=target_pct,
            configurations=[
                {
                    "seq": t.seq,
                    "configuration": describe(t.config),
                    **standing[t.config.key()].to_dict(),
                }
                for t in trials
            ],
        )

    def precision_final(
        self, standing: list[tuple[TrialConfig, Precision]], target_pct: float
    ) -> None:
        self._emit(
            "precision",
            target_pct=target_pct,
            configurations=[
                {"configuration": describe(config), **p.to_dict(), "text": p.text()}
                for config, p in standing
            ],
        )

    def trial_started(self, trial: Trial) -> None:
        self._emit(
            "trial_started",
            seq=trial.seq,
            repetition=trial.repetition,
            configuration=describe(trial.config),
        )

    def trial_finished(
        self, trial: Trial, status: TrialStatus, detail: str, goodput: float | None
    ) -> None:
        self._emit(
            "trial_finished",
            seq=trial.seq,
            status=status,
            detail=detail or None,
            goodput_bps=goodput,
        )

    def run_finished(self, run_id: int, status: RunStatus) -> None:
        self._emit("run_finished", run_id=run_id, status=status)


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
