"""Turns a diagnosis into concrete suggestions, each naming the setting to change.

A suggestion cites the evidence that triggered it. When the same run measured the
alternative (a configuration equal in every setting but the one the advice names), the
measured result replaces the generic hint: "traffic.stream_mode = processes measured
24,252 Mbit/s, +98%" says more than any rule of thumb, and a measured alternative that
did not help is reported as such rather than advised.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tunnelbench.analysis.diagnosis import (
    SATURATED_PCT,
    Bound,
    Diagnosis,
    Finding,
    Subject,
    generator_cores,
    threaded_generator,
)
from tunnelbench.kinds import Queue, StreamMode, TunnelKind
from tunnelbench.plan import TrialConfig, flatten

FIFOS = (None, Queue.PFIFO.value, Queue.PFIFO_FAST.value)
FAIR_QUEUES = (Queue.FQ_CODEL.value, Queue.CAKE.value, Queue.FQ.value)
ENCRYPTING = (TunnelKind.WIREGUARD,)
# tunnels/wireguard.py's userspace implementations (a unit test keeps them in step).
USERSPACE_WIREGUARD = ("wireguard-go", "wireguard-go-debian", "boringtun")
# Another userspace implementation this much faster is worth switching to (CPU-bound
# results vary ~10% run to run here).
FASTER_PCT = 10.0
RPS_IDLE_PCT = 25.0  # another core at least this idle can take receive processing
RPS_SOFTIRQ_PCT = 25.0  # softirq share on the saturated core worth spreading
# Crypto-relevant CPU flags, as /proc/cpuinfo names them, and what they accelerate.
CRYPTO_FLAGS = {
    "aes": "AES-NI (AES-GCM)",
    "pclmulqdq": "PCLMULQDQ (GHASH of AES-GCM)",
    "vaes": "VAES",
    "avx2": "AVX2 (ChaCha20-Poly1305)",
    "avx512f": "AVX-512",
}


@dataclass(frozen=True)
class Measured:
    """An alternative this run measured: the same configuration but for one setting."""

    setting: str
    value: Any
    goodput_bps: float
    change_pct: float  # against the advised configuration's median

    def text(self) -> str:
        return (
            f"measured in this run: {self.setting} = {_show(self.value)} gave"
            f" {self.goodput_bps / 1e6:,.0f} Mbit/s ({self.change_pct:+.0f}%)"
        )


@dataclass(frozen=True)
class Advice:
    setting: str | None  # the plan setting to change; None when it is outside the plan
    suggestion: str
    because: str  # the evidence that triggered it
    measured: Measured | None = None

    @property
    def refuted(self) -> bool:
        """The run measured the alternative and it was not faster."""
        return self.measured is not None and self.measured.change_pct <= 0

    def text(self) -> str:
        head = f"{self.suggestion} (`{self.setting}`)" if self.setting else self.suggestion
        if self.measured is not None:
            verdict = "no gain here" if self.refuted else "gain"
            return f"{head} — {self.measured.text()}: {verdict}; because {self.because}"
        return f"{head} — because {self.because}"


@dataclass(frozen=True)
class Sibling:
    """Another configuration of the same run, as advice sees it."""

    config: TrialConfig
    goodput_bps: float


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class Context:
    """The configuration being advised and the rest of its run."""

    def __init__(self, subject: Subject, diagnosis: Diagnosis, run: Sequence[Sibling]) -> None:
        self.subject = subject
        self.diagnosis = diagnosis
        self.run = run
        self._flat = flatten(subject.config.to_dict())

    def finding(self, bound: Bound) -> Finding | None:
        return next((f for f in self.diagnosis.findings if f.bound is bound), None)

    def measured(self, setting: str, better: Callable[[Any], bool]) -> Measured | None:
        """The best-measured sibling differing only in ``setting``, with a value ``better``
        accepts; None when the run did not measure one."""
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
                best = Measured(setting, value, sibling.goodput_bps, change)
        return best


AdviceRule = Callable[[Context], Advice | None]


def kernel_wireguard(c: Context) -> Advice | None:
    cpu = c.finding(Bound.CPU)
    implementation = c.subject.resolved.get("tunnel_implementation")
    if cpu is None or c.subject.config.tunnel.kind is not TunnelKind.WIREGUARD:
        return None
    if implementation not in USERSPACE_WIREGUARD:
        return None
    return Advice(
        "tunnel.implementation",
        f"prefer kernel WireGuard over userspace {implementation}",
        f"{cpu.summary}; {implementation} copies every packet between the kernel and userspace",
        c.measured("tunnel.implementation", lambda v: v == "kernel"),
    )


def faster_wireguard(c: Context) -> Advice | None:
    """Userspace implementations differ in CPU cost per packet and in how they queue and
    drop packets: when this run measured another one clearly faster with every other
    setting equal, say so, whatever limited this one."""
    implementation = c.subject.resolved.get("tunnel_implementation")
    if c.subject.config.tunnel.kind is not TunnelKind.WIREGUARD:
        return None
    if implementation not in USERSPACE_WIREGUARD:
        return None
    measured = c.measured(
        "tunnel.implementation", lambda v: v in USERSPACE_WIREGUARD and v != implementation
    )
    if measured is None or measured.change_pct < FASTER_PCT:
        return None
    return Advice(
        "tunnel.implementation",
        f"use {measured.value} rather than {implementation} where kernel WireGuard is not an"
        " option",
        f"{c.diagnosis.verdict.summary}; userspace implementations differ in CPU cost per"
        " packet and in how they queue and drop packets",
        measured,
    )


def raise_cpu_budget(c: Context) -> Advice | None:
    budget = c.subject.config.tunnel.cpu_budget
    cpu = c.finding(Bound.CPU)
    if budget is None or cpu is None:
        return None
    if not any(e.name == "tunnel.cpu_budget" for e in cpu.evidence):
        return None  # a saturated core, not the budget
    return Advice(
        "tunnel.cpu_budget",
        "give the tunnel endpoint more CPU time",
        cpu.summary,
        c.measured("tunnel.cpu_budget", lambda v: v is None or v > budget),
    )


def spread_softirq(c: Context) -> Advice | None:
    s = c.subject
    if c.finding(Bound.CPU) is None or not s.cores or s.config.lab.rps_cpus is not None:
        return None
    hot = max(s.cores, key=s.busy)
    softirq = s.metrics.get(f"cpu{hot}.softirq", 0.0)
    idle = {core: s.metrics[f"cpu{core}.idle"] for core in s.cores if core != hot}
    spare = [core for core, pct in idle.items() if pct >= RPS_IDLE_PCT]
    if s.busy(hot) < SATURATED_PCT or softirq < RPS_SOFTIRQ_PCT or not spare:
        return None
    mask = format(sum(1 << core for core in s.cores), "x")
    return Advice(
        "lab.rps_cpus",
        f'spread receive processing over the cores with RPS (e.g. rps_cpus = "{mask}")',
        f"cpu{hot} spends {softirq:.0f}% in softirq while cpu{spare[0]} is"
        f" {idle[spare[0]]:.0f}% idle",
        c.measured("lab.rps_cpus", lambda v: v is not None),
    )


def accelerated_crypto(c: Context) -> Advice | None:
    cpu = c.finding(Bound.CPU)
    if cpu is None or c.subject.config.tunnel.kind not in ENCRYPTING:
        return None
    flags = c.subject.environment.get("cpu_flags")
    if flags is None:
        return None
    present = [name for flag, name in CRYPTO_FLAGS.items() if flag in flags]
    missing = [name for flag, name in CRYPTO_FLAGS.items() if flag not in flags]
    if not missing:
        because = f"{cpu.summary}; the CPU offers {', '.join(present)}"
        suggestion = (
            "check that the tunnel's crypto uses the CPU's vector instructions"
            " (a VM may hide them from the guest kernel)"
        )
    else:
        because = f"{cpu.summary}; the CPU lacks {', '.join(missing)}"
        suggestion = "expect slow crypto on this CPU: prefer a CPU or cipher it accelerates"
    return Advice(None, suggestion, because)


def frequency_scaling(c: Context) -> Advice | None:
    cpu = c.finding(Bound.CPU) or c.finding(Bound.GENERATOR)
    governor = c.subject.environment.get("cpu_governor")
    if cpu is None or governor in (None, "performance"):
        return None  # without cpufreq (most VMs) there is nothing to check
    return Advice(
        None,
        'set the CPU frequency governor to "performance" for benchmarking',
        f"{cpu.summary}; the governor is {governor!r}, which lowers the clock between bursts",
    )


def generator_processes(c: Context) -> Advice | None:
    generator = c.finding(Bound.GENERATOR)
    s = c.subject
    if generator is None:
        return None
    if threaded_generator(s.config):
        if generator_cores(s) >= len(s.cores):
            return None  # its threads already keep every core busy: more of them cannot help
        return Advice(
            "traffic.streams",
            "spread the load over more streams (iperf2 runs each in a thread of its own)",
            generator.summary,
            c.measured("traffic.streams", lambda v: v > s.config.traffic.streams),
        )
    if s.config.traffic.streams > 1 and s.resolved.get("stream_mode") == "single":
        return Advice(
            "traffic.stream_mode",
            "run one generator process per stream (stream_mode = processes)",
            generator.summary,
            c.measured("traffic.stream_mode", lambda v: v == StreamMode.PROCESSES.value),
        )
    return Advice(
        "traffic.streams",
        "spread the load over several streams, each in its own generator process",
        generator.summary,
        c.measured("traffic.streams", lambda v: v > s.config.traffic.streams),
    )


def several_flows(c: Context) -> Advice | None:
    s = c.subject
    if s.config.traffic.streams != 1 or c.diagnosis.verdict.bound not in (
        Bound.CPU,
        Bound.UNDETERMINED,
    ):
        return None
    return Advice(
        "traffic.streams",
        "use several flows: one flow is processed on one core at a time",
        c.diagnosis.verdict.summary,
        c.measured("traffic.streams", lambda v: v > 1),
    )


def fair_queue(c: Context) -> Advice | None:
    finding = c.finding(Bound.QUEUE_DROPS) or c.finding(Bound.LATENCY)
    queue = c.subject.config.lab.wan.queue
    if finding is None or (queue.value if queue else None) not in FIFOS:
        return None
    if c.subject.config.lab.wan.rate is None:
        return None
    return Advice(
        "lab.wan.queue",
        "replace the FIFO with a fair, delay-managing queue (fq_codel or cake)",
        finding.summary,
        c.measured("lab.wan.queue", lambda v: v in FAIR_QUEUES),
    )


def larger_queue(c: Context) -> Advice | None:
    finding = c.finding(Bound.QUEUE_DROPS)
    wan = c.subject.config.lab.wan
    if finding is None or wan.rate is None or c.finding(Bound.LATENCY) is not None:
        return None
    return Advice(
        "lab.wan.queue_limit",
        f"a queue of {wan.queue_limit} packets is too small for this many flows; raise it",
        finding.summary,
        c.measured("lab.wan.queue_limit", lambda v: v > wan.queue_limit),
    )


RULES: tuple[AdviceRule, ...] = (
    kernel_wireguard,
    faster_wireguard,
    raise_cpu_budget,
    generator_processes,
    several_flows,
    spread_softirq,
    fair_queue,
    larger_queue,
    accelerated_crypto,
    frequency_scaling,
)


def advise(subject: Subject, diagnosis: Diagnosis, run: Sequence[Sibling]) -> list[Advice]:
    """Every suggestion for one configuration: measured gains first, refuted ones last."""
    context = Context(subject, diagnosis, run)
    found = [a for a in (rule(context) for rule in RULES) if a is not None]
    return sorted(found, key=lambda a: (a.refuted, a.measured is None))
