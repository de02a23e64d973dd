"""A tuning session as data: where it started, each step's candidate changes and what
measuring them decided, and how it ended.

Stored with the run (``runs.tune``) and rewritten after every trial, so that an
interrupted session resumes where it stopped and every report reads the path it took.
Step 0 measures the start configuration; each later step measures the candidates the
advice gave for the best configuration so far, interleaved with it.
"""

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import TrialConfig, flatten
from tunnelbench.model.wan import format_pct, format_us
from tunnelbench.units import format_rate


class Target(StrEnum):
    """What a tuning session improves, and what it must not worsen on the way."""

    THROUGHPUT = "throughput"  # the goodput's median, higher is better
    # The loaded round trip's 95th percentile, lower is better, without losing goodput.
    LATENCY = "latency"
    # A goodput gain that does not lengthen the loaded round trip.
    THROUGHPUT_KEEPING_LATENCY = "throughput-keeping-latency"

    @property
    def metric(self) -> str:
        return LOADED_P95 if self is Target.LATENCY else metric.GOODPUT.name

    @property
    def higher_is_better(self) -> bool:
        return self is not Target.LATENCY

    @property
    def guard(self) -> str | None:
        """The metric a kept change must not significantly worsen."""
        return {
            Target.THROUGHPUT: None,
            Target.LATENCY: metric.GOODPUT.name,
            Target.THROUGHPUT_KEEPING_LATENCY: LOADED_P95,
        }[self]


LOADED_P95 = metric.RTT_LOADED_P95.name


class Outcome(StrEnum):
    """What measuring a candidate against the best configuration decided."""

    UNDECIDED = "undecided"  # not yet, or the budget ended first
    BETTER = "better"
    WORSE = "worse"
    #: Equivalent: the interval of the ratio lies within ± the minimum gain.
    NO_DIFFERENCE = "no difference"
    #: The most runs a side were taken and the evidence shows neither a difference nor
    #: equivalence (-10%, 95% CI -17..+1%, p = 0.029 at a level of 0.0125): not "equal".
    NOT_DECIDED = "not decided"
    TOO_SMALL = "too small"  # significant, but a smaller gain than asked for
    LATENCY = "raised latency"  # faster, but its loaded round trip is significantly longer
    LOST_THROUGHPUT = "lost throughput"  # a shorter round trip, but significantly less goodput
    FAILED = "failed"  # its trials failed


class End(StrEnum):
    NOTHING_TO_IMPROVE = "nothing to improve"  # no advice this machine can follow
    NOTHING_HELPED = "nothing helped"
    BUDGET = "budget ended"
    MAX_STEPS = "step limit reached"


@dataclass
class Candidate:
    """One change to the best configuration, and what its measurement decided."""

    setting: str
    value: Any  # JSON: None unsets the setting
    key: str
    config: TrialConfig
    suggestion: str  # the advice that proposed it
    outcome: Outcome = Outcome.UNDECIDED
    runs: int = 0  # its successful runs in the step
    best_runs: int = 0  # the best configuration's, in the same step
    median: float | None = None  # of the target's metric
    best_median: float | None = None
    ratio_ci: list[float] | None = None  # median(candidate) / median(best), 95%
    p: float | None = None
    loaded_p95_ms: list[float] | None = None  # medians: [best, candidate]
    note: str = ""  # why, when the figures alone do not say

    @property
    def change(self) -> str:
        return f"{self.setting} = {show(self.value)}"

    @property
    def change_pct(self) -> float | None:
        if self.median is None or not self.best_median:
            return None
        return 100.0 * (self.median / self.best_median - 1.0)


@dataclass
class Excluded:
    """A candidate the advice gave that this machine cannot run, and why."""

    setting: str
    value: Any
    reason: str


@dataclass
class Step:
    number: int
    best_key: str
    best_config: TrialConfig
    first_seq: int  # the step's trials are those from this sequence number on
    diagnosis: str = ""  # the best configuration's verdict, which gave the candidates
    #: The best configuration's runs the diagnosis left out, with what disturbed each.
    left_out: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    excluded: list[Excluded] = field(default_factory=list)
    alpha: float = 0.05  # per comparison: the level divided among the candidates
    runs_needed: int = 4  # per side, the fewest that can reach alpha
    winner: str | None = None  # the kept candidate's key
    done: bool = False
    best_median: float | None = None  # the best's median of the target's metric here
    best_runs: int = 0  # its successful runs in the step

    @property
    def why_no_candidate(self) -> str:
        if self.excluded:
            return "no candidate this machine can run"
        return "no advice names a setting to change"

    def candidate(self, key: str) -> Candidate:
        return next(c for c in self.candidates if c.key == key)


@dataclass
class TuneRecord:
    target: Target
    budget_s: float
    max_runs: int  # per side and step
    min_gain_pct: float  # the smallest gain kept
    max_steps: int
    seed: int
    steps: list[Step] = field(default_factory=list)
    spent_s: float = 0.0  # wall time of the session's trials so far
    end: End | None = None
    final_key: str | None = None

    @property
    def start(self) -> TrialConfig:
        return self.steps[0].best_config

    @property
    def best(self) -> TrialConfig:
        return self.steps[-1].best_config

    def kept(self) -> list[tuple[Step, Candidate]]:
        """The changes kept, in order."""
        return [(s, s.candidate(s.winner)) for s in self.steps if s.winner is not None]

    def carried_runs(self, step: Step) -> int:
        """The runs of ``step``'s starting configuration that the step before took."""
        if step.number == 0:
            return 0
        before = self.steps[step.number - 1]
        return before.candidate(before.winner).runs if before.winner else before.best_runs

    def measured_keys(self) -> set[str]:
        keys = {s.best_key for s in self.steps}
        return keys | {c.key for s in self.steps for c in s.candidates}

    def to_dict(self) -> dict[str, Any]:
        """The stored form: plain JSON values (enums as their values, each configuration
        as :meth:`TrialConfig.to_dict` writes it)."""
        record = asdict(self)
        for step, stored in zip(self.steps, record["steps"], strict=True):
            stored["best_config"] = step.best_config.to_dict()
            for candidate, written in zip(step.candidates, stored["candidates"], strict=True):
                written["config"] = candidate.config.to_dict()
        data: dict[str, Any] = json.loads(json.dumps(record))
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TuneRecord":
        """The inverse of :meth:`to_dict`; a configuration recorded before a setting
        existed takes the value it ran with (:meth:`TrialConfig.from_dict`)."""
        steps = [
            Step(
                **{
                    k: v for k, v in s.items() if k not in ("candidates", "excluded", "best_config")
                },
                best_config=TrialConfig.from_dict(s["best_config"]),
                candidates=[
                    Candidate(
                        **c
                        | {
                            "outcome": Outcome(c["outcome"]),
                            "config": TrialConfig.from_dict(c["config"]),
                        }
                    )
                    for c in s["candidates"]
                ],
                excluded=[Excluded(**e) for e in s["excluded"]],
            )
            for s in data["steps"]
        ]
        end = data.get("end")
        return cls(
            **{k: v for k, v in data.items() if k not in ("steps", "target", "end")},
            target=Target(data["target"]),
            steps=steps,
            end=None if end is None else End(end),
        )


def show(value: Any) -> str:
    if value is None:
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def plan_snippet(config: TrialConfig) -> str:
    """A plan file (TOML) that runs ``config``: every setting that differs from the
    default, by section."""
    defaults = flatten(TrialConfig().to_dict())
    sections: dict[str, list[str]] = {}
    for path, value in flatten(config.to_dict()).items():
        # Every setting that may be unset defaults to unset.
        if value is None or (value == defaults.get(path) and path != "tunnel.kind"):
            continue
        if path in RATES:
            value = format_rate(value)
        elif path in DURATIONS:
            value = format_us(value)
        elif path in PERCENTS:
            value = format_pct(value)
        table, _, leaf = path.rpartition(".")
        sections.setdefault(table, []).append(f"{leaf} = {_toml_value(value)}")
    lines: list[str] = []
    for table in sorted(sections):
        lines += [f"[base.{table}]", *sections[table], ""]
    return "\n".join(lines).rstrip() + "\n"


#: Settings a plan writes as rate strings ("100mbit"), stored in bit/s.
RATES = frozenset({"lab.wan.rate", "traffic.udp_rate"})
#: ...as time strings ("20ms"), stored in microseconds, and as percentages ("1%").
DURATIONS = frozenset({"lab.wan.delay", "lab.wan.jitter"})
PERCENTS = frozenset({"lab.wan.loss", "lab.wan.reorder"})


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))
