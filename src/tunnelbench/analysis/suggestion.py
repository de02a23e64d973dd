"""Advice as data: a suggestion, what the run measured of it, and whether this machine can
follow it; and the context the advice rules read (:mod:`tunnelbench.analysis.advice`).

A suggestion cites the evidence that triggered it. When the same run measured the
alternative (a configuration equal in every setting but the one the advice names), the
measurement replaces the generic hint, judged by the project's comparison test
(:mod:`tunnelbench.analysis.significance`, as ``tunnelbench compare`` uses it): a
**gain** is claimed only when the rank test finds the difference significant; otherwise
"no measurable difference" with both medians and the p-value, or "too few runs to tell"
when the numbers of runs cannot reach significance at all (fewer than 4 a side).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tunnelbench.analysis import noise
from tunnelbench.analysis.diagnosis import Bound, Diagnosis, Finding, Subject
from tunnelbench.analysis.significance import (
    ALPHA,
    Comparison,
    compare,
    format_p,
    repetitions_needed,
)
from tunnelbench.model.environment import Environment
from tunnelbench.model.metrics import GOODPUT as GOODPUT_METRIC
from tunnelbench.model.plan import STREAMS_MAX, TrialConfig, flatten

Outcome = Literal["gain", "slower", "no difference", "too few runs"]
Goal = Literal["throughput", "latency", "both"]
State = Literal["yes", "no", "not probed", "not recorded"]


def mbit(bps: float) -> str:
    return f"{bps / 1e6:,.0f}"


@dataclass(frozen=True)
class Measured:
    """An alternative this run measured: the same configuration but for one setting,
    compared run by run with the advised configuration (A: this one, B: the other)."""

    setting: str
    value: Any
    goodput_bps: float  # the alternative's median
    change_pct: float  # against the advised configuration's median
    here_bps: float = 0.0  # the advised configuration's median
    comparison: Comparison | None = None  # None without the runs' own values
    noise_pct: float | None = None  # this machine's noise: the baseline's CV, %

    @property
    def in_noise(self) -> bool:
        """Whether the difference is smaller than this machine's noise."""
        return noise.within(self.change_pct, self.noise_pct)

    def _noise_note(self) -> str:
        return (
            f"; the {self.change_pct:+.1f}% is smaller than this machine's noise (CV"
            f" {self.noise_pct:.1f}% of the baseline's runs)"
            if self.in_noise
            else ""
        )

    @property
    def outcome(self) -> Outcome:
        c = self.comparison
        if c is None or not c.can_be_significant:
            return "too few runs"
        if not c.significant:
            return "no difference"
        return "gain" if self.goodput_bps > self.here_bps else "slower"

    def brief(self) -> str:
        """What the measurement said, in a few words: ``streams = 4: +129%, too few runs
        to tell``; :meth:`text` gives the figures and the test."""
        change = f"{self.setting} = {_show(self.value)}: {self.change_pct:+.0f}%"
        if self.outcome == "too few runs":
            return f"{change}, too few runs to tell"
        assert self.comparison is not None
        if self.outcome == "no difference":
            if self.in_noise:
                return f"{change}, within this machine's noise (CV {self.noise_pct:.1f}%)"
            return f"{self.setting} = {_show(self.value)}: no measurable difference"
        verdict = "gain" if self.outcome == "gain" else "slower"
        return f"{change} ({format_p(self.comparison.p)}): {verdict}"

    def text(self) -> str:
        c = self.comparison
        head = (
            f"measured in this run: {self.setting} = {_show(self.value)} gave"
            f" {mbit(self.goodput_bps)} Mbit/s against {mbit(self.here_bps)}"
            f" ({self.change_pct:+.0f}%"
        )
        if self.outcome == "too few runs":
            if c is None:
                runs = "the runs' own figures were not given"
            elif c.n1 == c.n2:
                runs = f"{c.n1} runs each"
            else:
                runs = f"{c.n1} runs here, {c.n2} there"
            return (
                f"{head}): too few runs to tell ({runs}; a rank test needs at least"
                f" {repetitions_needed()} of each to reach p < {ALPHA:g}){self._noise_note()}"
            )
        assert c is not None
        if self.outcome == "no difference":
            return (
                f"measured in this run: {self.setting} = {_show(self.value)}: no measurable"
                f" difference ({mbit(self.goodput_bps)} vs {mbit(self.here_bps)} Mbit/s,"
                f" {format_p(c.p)}){self._noise_note()}"
            )
        ci = ""
        if c.ratio_ci is not None:
            ci = f", 95% CI {100 * (c.ratio_ci[0] - 1):+.0f}%..{100 * (c.ratio_ci[1] - 1):+.0f}%"
        verdict = "gain" if self.outcome == "gain" else "slower here"
        # Significant yet inside one run's spread: the runs' number, not the size, shows it.
        note = (
            f" (smaller than one run's noise, CV {self.noise_pct:.1f}%: shown by"
            f" {c.n1} and {c.n2} runs)"
            if self.in_noise
            else ""
        )
        return f"{head}{ci}, {format_p(c.p)}): {verdict}{note}"


@dataclass(frozen=True)
class Availability:
    """Whether this run's kernel had what a suggestion needs, as the run recorded it."""

    what: str  # "kernel WireGuard"
    state: State
    detail: str = ""
    where: str = "this kernel"  # whose kernel was asked (a remote run's: the DUT's)

    def phrase(self, suggestion: str) -> str:
        """The suggestion as this machine allows it."""
        if self.state == "yes":
            return suggestion
        if self.state == "no":
            them = "them" if " and " in self.what else "it"
            verb = "are" if " and " in self.what else "is"
            return (
                f"{self.what} {verb} not available on {self.where} ({self.detail}); on a"
                f" kernel with {them}: {suggestion}"
            )
        if self.state == "not probed":
            return f"{suggestion} ({self.what}: availability not probed: {self.detail})"
        return f"{suggestion} ({self.what}: availability not recorded)"


def availability(environment: Environment, section: str, name: str, what: str) -> Availability:
    """``capabilities.<section>.<name>`` of the run's environment (``section`` "links",
    "qdiscs", "esp", or "openvpn_dco" with ``name`` empty)."""
    record = environment.capabilities
    found = None if record is None else record.found(section, name)
    if record is None or found is None:
        return Availability(what, "not recorded")
    detail = found.detail or ""
    where = record.where or "this kernel"
    if found.ok is None:
        return Availability(what, "not probed", detail, where)
    return Availability(what, "yes" if found.ok else "no", detail or "refused", where)


@dataclass(frozen=True)
class Advice:
    setting: str | None  # the plan setting to change; None when it is outside the plan
    suggestion: str
    because: str  # the evidence that triggered it
    measured: Measured | None = None
    #: Whether this machine can follow it, for suggestions that need a kernel feature.
    availability: Availability | None = None
    #: The values of ``setting`` worth measuring, most promising first (what
    #: ``tunnelbench tune`` tries); empty when the advice names no value to set.
    candidates: tuple[Any, ...] = ()
    #: What following it improves: goodput, the loaded round trip, or both.
    goal: Goal = "throughput"

    @property
    def available(self) -> State | None:
        return None if self.availability is None else self.availability.state

    @property
    def phrased(self) -> str:
        """The suggestion as this machine allows it ("... is not available on this kernel
        (reason); on a kernel with it: ...")."""
        if self.availability is None:
            return self.suggestion
        return self.availability.phrase(self.suggestion)

    @property
    def refuted(self) -> bool:
        """The run measured the alternative and it was not faster: significantly slower,
        or no measurable difference."""
        return self.measured is not None and self.measured.outcome in ("slower", "no difference")

    def text(self) -> str:
        head = f"{self.phrased} (`{self.setting}`)" if self.setting else self.phrased
        if self.measured is not None:
            return f"{head} — {self.measured.text()}; because {self.because}"
        return f"{head} — because {self.because}"


@dataclass(frozen=True)
class Sibling:
    """Another configuration of the same run, as advice sees it: its median and the
    goodput of each of its successful runs."""

    config: TrialConfig
    goodput_bps: float
    goodputs: tuple[float, ...] = ()


def more_streams(streams: int) -> tuple[int, ...]:
    """Twice and four times as many streams, within what a plan allows."""
    return tuple(sorted({min(streams * f, STREAMS_MAX) for f in (2, 4)} - {streams}))


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class Context:
    """The configuration being advised and the rest of its run."""

    def __init__(self, subject: Subject, diagnosis: Diagnosis, run: Sequence[Sibling]) -> None:
        self.subject = subject
        self.diagnosis = diagnosis
        self.run = run
        self._flat = flatten(subject.config.to_dict())
        self._goodputs = tuple(
            r[GOODPUT_METRIC.name] for r in subject.runs if GOODPUT_METRIC.name in r
        )

    def finding(self, *bounds: Bound) -> Finding | None:
        """The first finding of one of ``bounds``; a limit the lab itself set (offloads
        off) is none of the configuration's, so its own advice is the lab setting's."""
        return next(
            (f for f in self.diagnosis.findings if f.bound in bounds and f.lab_setting is None),
            None,
        )

    def available(self, section: str, name: str, what: str) -> Availability:
        return availability(self.subject.environment, section, name, what)

    def measured(self, setting: str, better: Callable[[Any], bool]) -> Measured | None:
        """The best-measured sibling differing only in ``setting``, with a value ``better``
        accepts, compared with this configuration's runs; None when the run did not
        measure one."""
        best: Measured | None = None
        here = self.subject.goodput_bps
        for sibling in self.run:
            flat = flatten(sibling.config.to_dict())
            value = flat.get(setting)
            if value == self._flat.get(setting) or not better(value):
                continue
            others = {k: v for k, v in flat.items() if k != setting}
            mine = {k: v for k, v in self._flat.items() if k != setting}
            if others != mine or here <= 0:
                continue
            change = 100.0 * (sibling.goodput_bps / here - 1.0)
            if best is None or change > best.change_pct:
                comparison = (
                    compare(self._goodputs, sibling.goodputs)
                    if self._goodputs and sibling.goodputs
                    else None
                )
                best = Measured(
                    setting,
                    value,
                    sibling.goodput_bps,
                    change,
                    here,
                    comparison,
                    self.subject.noise_pct,
                )
        return best


AdviceRule = Callable[[Context], Advice | None]
