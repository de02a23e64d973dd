"""Groups a run's trials by configuration and compares each with its baseline."""

from dataclasses import dataclass, field

from tunnelbench.analysis import noise
from tunnelbench.analysis.advice import Advice, Sibling, advise
from tunnelbench.analysis.ceiling import Ceiling, for_config
from tunnelbench.analysis.diagnosis import Diagnosis, Subject, diagnose, medians
from tunnelbench.analysis.stats import Summary, summarize
from tunnelbench.kinds import Protection, Protocol
from tunnelbench.model import metrics as metric
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import TrialConfig, varying_paths
from tunnelbench.model.records import Resolved, TrialRecord, TrialStatus


@dataclass
class BusiestCore:
    core: int
    busy: float
    user: float
    system: float
    softirq: float


@dataclass(frozen=True)
class Latency:
    """Round trips of one configuration: idle (before the traffic) and under load (over
    the measured window), each the median over the runs; ``p95_runs`` holds each run's
    loaded 95th percentile, in run order, for the spread."""

    idle_ms: float
    loaded_ms: float | None
    loaded_p95_ms: float | None
    p95_runs: tuple[float, ...]

    @property
    def increase_ms(self) -> float | None:
        """What the load added to the median round trip."""
        return None if self.loaded_ms is None else self.loaded_ms - self.idle_ms


@dataclass
class ConfigSummary:
    key: str
    config: TrialConfig
    resolved: Resolved
    trials: list[TrialRecord]
    goodput: Summary | None  # bit/s over the successful trials
    retransmits: Summary | None  # TCP retransmits per run (see retransmits_metric)
    baseline_key: str | None
    pct_of_baseline: float | None = None
    busiest_core: BusiestCore | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # medians over the ok trials
    processes_cpu: dict[str, float] = field(default_factory=dict)  # median % of one core
    ceiling: Ceiling | None = None  # when the WAN link's rate is known
    pct_of_ceiling: float | None = None
    diagnosis: Diagnosis | None = None  # None without a successful trial
    advice: list[Advice] = field(default_factory=list)
    # The metric ``retransmits`` summarizes: KERNEL_RETRANSMITS, or GENERATOR_RETRANSMITS
    # for runs recorded before the kernel's window counters; None with no figure.
    retransmits_metric: str | None = None
    #: This machine's noise for this configuration: its baseline's CV in % (its own for a
    #: baseline); None when the run did not measure the baseline often enough.
    noise_pct: float | None = None

    @property
    def latency(self) -> Latency | None:
        """None when the runs recorded no round trips (runs before the RTT probe)."""
        idle = self.metrics.get(metric.RTT_IDLE.name)
        if idle is None:
            return None
        ok = [t for t in self.trials if t.status is TrialStatus.OK]
        return Latency(
            idle_ms=idle,
            loaded_ms=self.metrics.get(metric.RTT_LOADED.name),
            loaded_p95_ms=self.metrics.get(metric.RTT_LOADED_P95.name),
            p95_runs=tuple(
                t.metrics[metric.RTT_LOADED_P95.name]
                for t in ok
                if metric.RTT_LOADED_P95.name in t.metrics
            ),
        )

    @property
    def failed(self) -> list[TrialRecord]:
        return [t for t in self.trials if t.status is TrialStatus.FAILED]

    @property
    def skipped(self) -> str | None:
        """Why this machine skipped the configuration, when it skipped every trial."""
        if self.trials and all(t.status is TrialStatus.SKIPPED for t in self.trials):
            return self.trials[0].error
        return None

    @property
    def label(self) -> str:
        """``wireguard (wireguard-go)``, ``vxlan+ipsec (libipsec)``: the kind, its
        protection, and the implementation where the kind has several."""
        settings = self.config.tunnel
        tunnel = settings.kind.value
        if settings.protection is not Protection.NONE:
            tunnel = f"{tunnel}+{settings.protection.value}"
        implementation = self.resolved.setup.implementation
        if settings.protection is not Protection.NONE:
            # The protected kind's own implementation is the kernel's: who does ESP
            # (kernel or libipsec) is what varies.
            implementation = self.resolved.esp_or_tunnel_implementation
        facts = self.resolved.tunnel
        several = facts is not None and len(facts.implementations) > 1
        if implementation and (several or settings.protection is not Protection.NONE):
            tunnel = f"{tunnel} ({implementation})"
        return tunnel


#: The kernel's count: RetransSegs of the client's and the server's namespaces over the
#: measured window (tunnelbench.probes.tcp).
KERNEL_RETRANSMITS = metric.KERNEL_RETRANSMITS.name
#: The load generator's own count over its measured window (iperf3's; iperf2 has none).
GENERATOR_RETRANSMITS = metric.RETRANSMITS.name


def retransmits_per_run(
    config: TrialConfig, ok: list[TrialRecord]
) -> tuple[Summary | None, str | None]:
    """TCP retransmits per run and the metric they come from: the kernel's window count
    when every measured trial has it, else the generator's (trials stored before the
    kernel's counters), never a mix of the two. None for UDP."""
    if config.traffic.protocol is Protocol.UDP:
        return None, None
    for name in (KERNEL_RETRANSMITS, GENERATOR_RETRANSMITS):
        if ok and all(name in t.metrics for t in ok):
            return summarize([t.metrics[name] for t in ok]), name
    for name in (GENERATOR_RETRANSMITS, KERNEL_RETRANSMITS):  # a run resumed across versions
        values = [t.metrics[name] for t in ok if name in t.metrics]
        if values:
            return summarize(values), name
    return None, None


def _busiest(metrics: dict[str, float]) -> BusiestCore | None:
    """The core with the highest median busy share, and its median split."""
    cores = metric.cores(n for n in metrics if n.endswith(".idle"))
    found = [
        BusiestCore(
            c,
            100.0 - metrics[metric.cpu(c, "idle")],
            metrics[metric.cpu(c, "user")],
            metrics[metric.cpu(c, "system")],
            metrics[metric.cpu(c, "softirq")],
        )
        for c in cores
    ]
    return max(found, key=lambda core: core.busy) if found else None


def summarize_run(
    trials: list[TrialRecord], environment: Environment | None = None
) -> list[ConfigSummary]:
    """One summary per configuration, in first-run order, with % of baseline, % of the
    ceiling, the diagnosis and the advice filled in. ``environment`` (the run's) lets the
    advice cite CPU flags and the frequency governor."""
    groups: dict[str, list[TrialRecord]] = {}
    for trial in trials:
        groups.setdefault(trial.config_key, []).append(trial)
    summaries = []
    for key, group in groups.items():
        config = group[0].config
        ok = [t for t in group if t.status is TrialStatus.OK]
        baseline = config.baseline().key()
        metrics = medians(t.metrics for t in ok)
        retransmits, retransmits_metric = retransmits_per_run(config, ok)
        summaries.append(
            ConfigSummary(
                key=key,
                config=config,
                resolved=group[0].resolved,
                trials=group,
                goodput=summarize([t.metrics[metric.GOODPUT.name] for t in ok]),
                retransmits=retransmits,
                retransmits_metric=retransmits_metric,
                baseline_key=None if baseline == key else baseline,
                metrics=metrics,
                busiest_core=_busiest(metrics),
                processes_cpu={
                    label: value
                    for name, value in sorted(metrics.items())
                    if (label := metric.process_label(name)) is not None
                },
            )
        )
    by_key = {s.key: s for s in summaries}
    for summary in summaries:
        base = by_key.get(summary.baseline_key or "")
        if summary.baseline_key is None:
            summary.noise_pct = noise.cv_pct(summary.goodput)
        elif base is not None:
            summary.noise_pct = noise.cv_pct(base.goodput)
        if base and base.goodput and summary.goodput and base.goodput.median > 0:
            summary.pct_of_baseline = 100.0 * summary.goodput.median / base.goodput.median
        elif summary.baseline_key is None and summary.goodput:
            summary.pct_of_baseline = 100.0
    _assess(summaries, environment or Environment())
    return summaries


def _ok(summary: ConfigSummary) -> list[TrialRecord]:
    return [t for t in summary.trials if t.status is TrialStatus.OK]


def _assess(summaries: list[ConfigSummary], environment: Environment) -> None:
    siblings = [
        Sibling(s.config, s.goodput.median, tuple(t.metrics[metric.GOODPUT.name] for t in _ok(s)))
        for s in summaries
        if s.goodput
    ]
    for summary in summaries:
        if summary.goodput is None:
            continue  # nothing measured; a skipped configuration has no resolved settings
        summary.ceiling = for_config(summary.config, summary.resolved)
        if summary.ceiling is not None and summary.ceiling.goodput_bps > 0:
            summary.pct_of_ceiling = 100.0 * summary.goodput.median / summary.ceiling.goodput_bps
        # The goodput the rules judge is the summary's median, whatever other metrics say.
        metrics = summary.metrics | {metric.GOODPUT.name: summary.goodput.median}
        subject = Subject(
            summary.config,
            summary.resolved,
            metrics,
            summary.ceiling.goodput_bps if summary.ceiling else None,
            where(summary.config, environment),
            runs=tuple(t.metrics for t in _ok(summary)),
            noise_pct=summary.noise_pct,
            failed=len(summary.failed),
        )
        summary.diagnosis = diagnose(subject)
        summary.advice = advise(subject, summary.diagnosis, siblings)


def where(config: TrialConfig, environment: Environment) -> Environment:
    """The environment ``config``'s trials ran in: the run's, or for a lab on another
    kernel its VM guest's (what that kernel can do is what advice must cite)."""
    if config.lab.in_vm:
        return environment.guest(config.lab.kernel) or Environment()
    return environment


def varying_axes(summaries: list[ConfigSummary]) -> list[str]:
    """Setting paths (e.g. ``traffic.streams``) whose value differs between configurations."""
    return varying_paths(s.config for s in summaries)
