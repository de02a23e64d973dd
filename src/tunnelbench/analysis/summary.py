"""Groups a run's trials by configuration and compares each with its baseline."""

from dataclasses import dataclass, field
from typing import Any

from tunnelbench.analysis.stats import Summary, summarize
from tunnelbench.plan import TrialConfig, varying_paths
from tunnelbench.store import TrialRecord


@dataclass
class BusiestCore:
    core: int
    busy: float
    user: float
    system: float
    softirq: float


@dataclass
class ConfigSummary:
    key: str
    config: TrialConfig
    resolved: dict[str, Any]
    trials: list[TrialRecord]
    goodput: Summary | None  # bit/s over the successful trials
    retransmits: Summary | None
    baseline_key: str | None
    pct_of_baseline: float | None = None
    busiest_core: BusiestCore | None = None
    processes_cpu: dict[str, float] = field(default_factory=dict)  # median % of one core

    @property
    def failed(self) -> list[TrialRecord]:
        return [t for t in self.trials if t.status == "failed"]

    @property
    def skipped(self) -> str | None:
        """Why this machine skipped the configuration, when it skipped every trial."""
        if self.trials and all(t.status == "skipped" for t in self.trials):
            return self.trials[0].error
        return None

    @property
    def label(self) -> str:
        tunnel = self.config.tunnel.kind.value
        implementation = self.resolved.get("tunnel_implementation")
        if implementation and tunnel not in ("none", "vxlan"):
            tunnel = f"{tunnel} ({implementation})"
        return tunnel


def _median(values: list[float]) -> float:
    summary = summarize(values)
    return summary.median if summary else 0.0


def _busiest(trials: list[TrialRecord]) -> BusiestCore | None:
    """The core with the highest median busy share, and its median split."""
    cores = sorted(
        {name.split(".")[0] for t in trials for name in t.metrics if name.startswith("cpu")}
    )
    best: BusiestCore | None = None
    for name in cores:
        samples = [t.metrics for t in trials if f"{name}.idle" in t.metrics]
        if not samples:
            continue
        parts = {
            p: _median([m[f"{name}.{p}"] for m in samples])
            for p in ("user", "system", "softirq", "idle")
        }
        core = BusiestCore(
            int(name[3:]), 100.0 - parts["idle"], parts["user"], parts["system"], parts["softirq"]
        )
        if best is None or core.busy > best.busy:
            best = core
    return best


def summarize_run(trials: list[TrialRecord]) -> list[ConfigSummary]:
    """One summary per configuration, in first-run order, with % of baseline filled in."""
    groups: dict[str, list[TrialRecord]] = {}
    for trial in trials:
        groups.setdefault(trial.config_key, []).append(trial)
    summaries = []
    for key, group in groups.items():
        config = TrialConfig.from_dict(group[0].config)
        ok = [t for t in group if t.status == "ok"]
        baseline = config.baseline().key()
        proc_labels = sorted({n for t in ok for n in t.metrics if n.startswith("proc.")})
        summaries.append(
            ConfigSummary(
                key=key,
                config=config,
                resolved=group[0].resolved,
                trials=group,
                goodput=summarize([t.metrics["goodput_bps"] for t in ok]),
                retransmits=summarize(
                    [t.metrics["retransmits"] for t in ok if "retransmits" in t.metrics]
                ),
                baseline_key=None if baseline == key else baseline,
                busiest_core=_busiest(ok),
                processes_cpu={
                    label[5:]: _median([t.metrics[label] for t in ok if label in t.metrics])
                    for label in proc_labels
                },
            )
        )
    by_key = {s.key: s for s in summaries}
    for summary in summaries:
        base = by_key.get(summary.baseline_key or "")
        if base and base.goodput and summary.goodput and base.goodput.median > 0:
            summary.pct_of_baseline = 100.0 * summary.goodput.median / base.goodput.median
        elif summary.baseline_key is None and summary.goodput:
            summary.pct_of_baseline = 100.0
    return summaries


def varying_axes(summaries: list[ConfigSummary]) -> list[str]:
    """Setting paths (e.g. ``traffic.streams``) whose value differs between configurations."""
    return varying_paths(s.config for s in summaries)
