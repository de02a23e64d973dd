"""This machine's noise: how much a figure moves when nothing is changed, and which
trials something outside the lab disturbed.

The noise floor is the coefficient of variation (CV) of the run's baselines, the
configurations without a tunnel, over their repeated runs: the same lab, the same
traffic, measured in the same run on the same machine, so whatever spread they show
comes from the machine and the method, not from a tunnel. A difference between two
configurations smaller than that spread cannot be told from the machine's own wobble by
looking at medians, however it came out; reports and advice say so instead of calling a
winner. Each configuration is held against its own baseline's CV (a CPU-bound baseline
varies far more than one held by a shaped link, which is exact).

A trial is flagged when the hypervisor took time from a core (steal) or processes outside
the lab used the CPU during its measured window, with the thresholds of the diagnosis
rules that judge the same metrics, and when its window was not in steady state (its
round trip or goodput still rising: :mod:`tunnelbench.analysis.steadiness`). A trial in a
VM guest is also flagged by what its host did over that window (``vmhost.*``,
:mod:`tunnelbench.probes.vmhost`): the guest sees neither steal nor its host's other
processes, so its own figures read 0 while the host was busy.
"""

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunnelbench.analysis.diagnosis import OUTSIDE_LOAD_PCT, STEAL_PCT, worst_steal
from tunnelbench.analysis.stats import Summary
from tunnelbench.analysis.steadiness import unsteady
from tunnelbench.model import metrics as metric
from tunnelbench.model.records import TrialRecord, TrialStatus

#: Fewer runs than this give no usable spread.
MIN_RUNS = 3
#: The terminal lists at most this many disturbed trials in full; more are one line.
TERSE_DISTURBED = 2
#: The trial numbers that one line names before "…".
TERSE_SEQS = 8


def cv_pct(goodput: Summary | None) -> float | None:
    """A baseline's CV in percent, when it had enough runs to have one."""
    if goodput is None or goodput.n < MIN_RUNS or goodput.cv is None:
        return None
    return 100.0 * goodput.cv


@dataclass(frozen=True)
class Baseline:
    """One baseline's spread: ``name`` as the reports name the configuration."""

    key: str
    name: str
    runs: int
    cv_pct: float

    def text(self) -> str:
        return f"{self.name}: CV {self.cv_pct:.1f}% over {self.runs} runs"


@dataclass(frozen=True)
class Disturbed:
    """A trial something outside the lab took CPU from during its measured window, or
    whose window was not in steady state."""

    seq: int
    config_key: str
    name: str
    what: tuple[str, ...]  # "steal 2.3% of cpu1", "outside processes 45% of a core"

    def text(self) -> str:
        return f"trial {self.seq} ({self.name}): {', '.join(self.what)}"


def _kind(what: str) -> str:
    """``steal 2.3% of cpu1`` -> ``steal``; ``not steady: loaded RTT rose …`` -> ``not
    steady``: what disturbed a trial, without its figures."""
    return re.split(r"[:\d]", what, maxsplit=1)[0].strip().rstrip(",")


def disturbances(metrics: dict[str, float]) -> tuple[str, ...]:
    """What took CPU from one trial's measured window, or what still moved across it (the
    window was not in steady state: :mod:`tunnelbench.analysis.steadiness`), in words;
    empty when nothing did (or the trial was recorded before these were measured)."""
    found = list(unsteady(metrics))
    if (stolen := worst_steal(metrics)) is not None and stolen[1] >= STEAL_PCT:
        found.append(f"steal {stolen[1]:.1f}% of cpu{stolen[0]}")
    outside = metrics.get(metric.LOAD_OUTSIDE.name)
    if outside is not None and outside >= OUTSIDE_LOAD_PCT:
        found.append(f"outside processes {outside:.0f}% of a core")
    host = metrics.get(metric.VMHOST_OUTSIDE.name)
    if host is not None and host >= OUTSIDE_LOAD_PCT:
        found.append(f"on the VM's host, processes outside the VM {host:.0f}% of a core")
    host_steal = metrics.get(metric.VMHOST_STEAL.name)
    if host_steal is not None and host_steal >= STEAL_PCT:
        found.append(f"on the VM's host, steal {host_steal:.1f}% of a core")
    return tuple(found)


@dataclass(frozen=True)
class Noise:
    baselines: tuple[Baseline, ...]
    disturbed: tuple[Disturbed, ...]

    @property
    def floor_pct(self) -> float | None:
        """The largest baseline CV: the spread a difference must beat anywhere in the run."""
        return max((b.cv_pct for b in self.baselines), default=None)

    def lines(self, terse: bool = False) -> list[str]:
        """What every report says about the run's noise; empty when it measured no
        baseline often enough and nothing was disturbed. ``terse`` (the terminal) gives
        the range of the other baselines' CVs rather than each of them."""
        out = []
        if self.baselines:
            worst = max(self.baselines, key=lambda b: b.cv_pct)
            others = [b for b in self.baselines if b is not worst]
            rest = f"; other baselines: {'; '.join(b.text() for b in others)}" if others else ""
            if terse and len(others) > 1:
                low, high = min(b.cv_pct for b in others), max(b.cv_pct for b in others)
                rest = f"; {len(others)} other baselines: CV {low:.1f}-{high:.1f}%"
            out.append(
                f"noise floor: CV {worst.cv_pct:.1f}% ({worst.name}, {worst.runs} runs{rest})."
                " A difference smaller than its configuration's baseline CV is within this"
                " machine's noise."
            )
        if terse and len(self.disturbed) > TERSE_DISTURBED:
            out.append(self.folded())
        elif self.disturbed:
            out.append(
                f"disturbed: {len(self.disturbed)} trial(s): "
                + "; ".join(d.text() for d in self.disturbed)
            )
        return out

    def folded(self) -> str:
        """The disturbed trials in one line, for the terminal: their numbers and what
        disturbed them, counted (``disturbed: 9 trial(s) (3, 5, 8, …): not steady (7),
        steal (2)``); the reports keep each one's figures."""
        seqs = [str(d.seq) for d in self.disturbed]
        named = ", ".join(seqs[:TERSE_SEQS]) + (", …" if len(seqs) > TERSE_SEQS else "")
        kinds = Counter(_kind(w) for d in self.disturbed for w in d.what)
        causes = ", ".join(k if n == 1 else f"{k} ({n})" for k, n in kinds.most_common())
        return f"disturbed: {len(seqs)} trial(s) ({named}): {causes}; the reports give the figures"

    def to_dict(self) -> dict[str, Any]:
        return {
            "floor_pct": self.floor_pct,
            "baselines": [
                {"config_key": b.key, "name": b.name, "runs": b.runs, "cv_pct": b.cv_pct}
                for b in self.baselines
            ],
            "disturbed": [
                {"seq": d.seq, "config_key": d.config_key, "name": d.name, "what": list(d.what)}
                for d in self.disturbed
            ],
        }


def measure(
    named: Sequence[tuple[str, str, Summary | None, bool]], trials: Sequence[TrialRecord]
) -> Noise:
    """The noise of a run: ``named`` holds each configuration's (key, name, goodput
    summary, whether it is a baseline), in report order."""
    names = {key: name for key, name, _, _ in named}
    baselines = tuple(
        Baseline(key, name, goodput.n, cv)
        for key, name, goodput, is_baseline in named
        if is_baseline and goodput is not None and (cv := cv_pct(goodput)) is not None
    )
    disturbed = tuple(
        Disturbed(t.seq, t.config_key, names.get(t.config_key, t.config_key), what)
        for t in sorted(trials, key=lambda t: t.seq)
        if t.status is TrialStatus.OK and (what := disturbances(t.metrics))
    )
    return Noise(baselines, disturbed)


def within(change_pct: float, noise_pct: float | None) -> bool:
    """Whether a difference of ``change_pct`` (either sign) is inside a CV of
    ``noise_pct``."""
    return noise_pct is not None and abs(change_pct) < noise_pct
