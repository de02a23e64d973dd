"""Turns a diagnosis into concrete suggestions, each naming the setting to change.

A suggestion cites the evidence that triggered it. When the same run measured the
alternative (a configuration equal in every setting but the one the advice names), the
measurement replaces the generic hint, judged by the project's comparison test
(:mod:`tunnelbench.analysis.significance`, as ``tunnelbench compare`` uses it): a
**gain** is claimed only when the rank test finds the difference significant; otherwise
"no measurable difference" with both medians and the p-value, or "too few runs to tell"
when the numbers of runs cannot reach significance at all (fewer than 4 a side).

Advice respects what this machine can do: a suggestion that needs a kernel feature
(kernel WireGuard, fq_codel or cake, kernel ESP, OpenVPN's DCO) reads the capabilities
the run recorded (:func:`tunnelbench.bench.environment.capability_record`) and, where the
kernel lacks it, says so with the kernel's reason ("not available on this kernel (...);
on a kernel with it: ..."). A run recorded before capabilities were says "availability
not recorded".
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tunnelbench.analysis import noise
from tunnelbench.analysis.diagnosis import (
    SATURATED_PCT,
    Bound,
    Diagnosis,
    Finding,
    Subject,
    core_name,
    dut,
    generator_cores,
    threaded_generator,
)
from tunnelbench.analysis.significance import (
    ALPHA,
    Comparison,
    compare,
    format_p,
    repetitions_needed,
)
from tunnelbench.kinds import Cipher, Queue, StreamMode, TunnelKind, WanEncapsulation
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import (
    CPU_BUDGET_MAX,
    QUEUE_LIMIT_MAX,
    STREAMS_MAX,
    TrialConfig,
    flatten,
)
from tunnelbench.model.records import Resolved
from tunnelbench.units import human_rate

FIFOS = (None, Queue.PFIFO.value, Queue.PFIFO_FAST.value)
FAIR_QUEUES = (Queue.FQ_CODEL.value, Queue.CAKE.value, Queue.FQ.value)
# The fair queues the advice names, in order of preference.
ADVISED_QUEUES = (Queue.FQ_CODEL.value, Queue.CAKE.value)
# The kernel's name of each ESP AEAD (tunnels/strongswan.py's KERNEL_ALGORITHMS).
KERNEL_ESP = {
    Cipher.AES_256_GCM.value: "rfc4106(gcm(aes))",
    Cipher.CHACHA20_POLY1305.value: "rfc7539esp(chacha20,poly1305)",
}
# Another userspace implementation this much faster is worth switching to (CPU-bound
# results vary ~10% run to run here).
FASTER_PCT = 10.0
QUEUE_LIMIT_MIN = 2  # packets: the shortest queue advice proposes
#: The evidence a CPU budget's verdict names (tunnel.cpu_budget, lab.budget.<role>).
BUDGETS = ("tunnel.cpu_budget", "lab.budget.")
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
# The flags each cipher's fast implementations need (AES-NI and carry-less multiply for
# AES-GCM; AVX2 for ChaCha20-Poly1305), and those that speed them up further.
CIPHER_FLAGS = {
    Cipher.AES_256_GCM.value: (("aes", "pclmulqdq"), ("vaes", "avx512f")),
    Cipher.CHACHA20_POLY1305.value: (("avx2",), ("avx512f",)),
}
# Without a known cipher: any of the ciphers' needs met is enough.
ANY_CIPHER = (("aes", "pclmulqdq", "avx2"), ("vaes", "avx512f"))

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

    def phrase(self, suggestion: str) -> str:
        """The suggestion as this machine allows it."""
        if self.state == "yes":
            return suggestion
        if self.state == "no":
            them = "them" if " and " in self.what else "it"
            verb = "are" if " and " in self.what else "is"
            return (
                f"{self.what} {verb} not available on this kernel ({self.detail}); on a"
                f" kernel with {them}: {suggestion}"
            )
        if self.state == "not probed":
            return f"{suggestion} ({self.what}: availability not probed: {self.detail})"
        return f"{suggestion} ({self.what}: availability not recorded)"


def availability(environment: dict[str, Any], section: str, name: str, what: str) -> Availability:
    """``capabilities.<section>.<name>`` of the run's environment (``section`` "links",
    "qdiscs", "esp", or "openvpn_dco" with ``name`` empty)."""
    record = environment.get("capabilities")
    if not isinstance(record, dict):
        return Availability(what, "not recorded")
    found = record.get(section)
    if name and isinstance(found, dict):
        found = found.get(name)
    if not isinstance(found, dict) or "ok" not in found:
        return Availability(what, "not recorded")
    ok, detail = found["ok"], str(found.get("detail") or "")
    if ok is None:
        return Availability(what, "not probed", detail)
    return Availability(what, "yes" if ok else "no", detail or "refused")


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


def encrypting(resolved: Resolved) -> bool:
    """Whether the trial's packets were encrypted, as its tunnel kind declared: the kind's
    own cipher (WireGuard, OpenVPN, IPsec), or ESP protecting an unencrypted kind."""
    return resolved.tunnel is not None and resolved.tunnel.encrypts


def userspace(resolved: Resolved) -> bool:
    """Whether the trial's data path (encryption or encapsulation) ran in a userspace
    process, as its kind declared."""
    return resolved.tunnel is not None and resolved.tunnel.userspace


class Context:
    """The configuration being advised and the rest of its run."""

    def __init__(self, subject: Subject, diagnosis: Diagnosis, run: Sequence[Sibling]) -> None:
        self.subject = subject
        self.diagnosis = diagnosis
        self.run = run
        self._flat = flatten(subject.config.to_dict())
        self._goodputs = tuple(r["goodput_bps"] for r in subject.runs if "goodput_bps" in r)

    def finding(self, *bounds: Bound) -> Finding | None:
        return next((f for f in self.diagnosis.findings if f.bound in bounds), None)

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


def kernel_wireguard(c: Context) -> Advice | None:
    cpu = c.finding(Bound.CPU)
    implementation = c.subject.resolved.tunnel_implementation
    if cpu is None or c.subject.config.tunnel.kind is not TunnelKind.WIREGUARD:
        return None
    if not userspace(c.subject.resolved):
        return None
    return Advice(
        "tunnel.implementation",
        f"prefer kernel WireGuard over userspace {implementation}",
        f"{cpu.summary}; {implementation} copies every packet between the kernel and userspace",
        c.measured("tunnel.implementation", lambda v: v == "kernel"),
        c.available("links", "wireguard", "kernel WireGuard"),
        ("kernel",),
    )


def kernel_esp(c: Context) -> Advice | None:
    """strongSwan's userspace ESP (libipsec) is CPU-bound: the kernel's ESP does the same
    work without copying every packet through a TUN device."""
    cpu = c.finding(Bound.CPU)
    s = c.subject
    wire = s.resolved.tunnel.wire if s.resolved.tunnel else None
    if cpu is None or wire is None or not wire.esp or not userspace(s.resolved):
        return None
    cipher = s.resolved.tunnel_cipher or ""
    algorithm = KERNEL_ESP.get(cipher)
    can = (
        c.available("esp", algorithm, f"the kernel's ESP with {cipher}")
        if algorithm
        else Availability("the kernel's ESP", "not recorded")
    )
    ipsec = s.config.tunnel.kind is TunnelKind.IPSEC
    return Advice(
        "tunnel.implementation" if ipsec else None,
        "use the kernel's ESP instead of strongSwan's userspace libipsec",
        f"{cpu.summary}; libipsec copies every packet between the kernel and userspace",
        c.measured("tunnel.implementation", lambda v: v == "kernel") if ipsec else None,
        can,
        ("kernel",) if ipsec else (),
    )


def openvpn_dco(c: Context) -> Advice | None:
    """OpenVPN is CPU-bound with its data channel in userspace: data channel offload
    (ovpn-dco) moves encryption and forwarding into the kernel."""
    cpu = c.finding(Bound.CPU)
    s = c.subject
    if cpu is None or s.config.tunnel.kind is not TunnelKind.OPENVPN:
        return None
    if s.resolved.openvpn_dco is True:
        return None
    can = c.available("openvpn_dco", "", "OpenVPN's data channel offload (ovpn-dco)")
    suggestion = (
        "let OpenVPN's data channel run in the kernel with ovpn-dco (openvpn-dco-dkms;"
        " tunnelbench uses it when the kernel has it)"
    )
    if can.state == "yes":
        reason = s.resolved.openvpn_dco_reason
        suggestion += f": this run did not ({reason})" if reason else ""
    return Advice(
        None,
        suggestion,
        f"{cpu.summary}; without DCO every packet crosses into the openvpn process and back",
        None,
        can,
    )


def faster_wireguard(c: Context) -> Advice | None:
    """Userspace implementations differ in CPU cost per packet and in how they queue and
    drop packets: when this run measured another one clearly faster with every other
    setting equal, say so, whatever limited this one."""
    implementation = c.subject.resolved.tunnel_implementation
    facts = c.subject.resolved.tunnel
    if c.subject.config.tunnel.kind is not TunnelKind.WIREGUARD or facts is None:
        return None
    if not facts.userspace:
        return None
    others = facts.userspace_implementations
    measured = c.measured("tunnel.implementation", lambda v: v in others and v != implementation)
    if measured is None or measured.change_pct < FASTER_PCT or measured.outcome == "no difference":
        return None
    return Advice(
        "tunnel.implementation",
        f"use {measured.value} rather than {implementation} where kernel WireGuard is not an"
        " option",
        f"{c.diagnosis.verdict.summary}; userspace implementations differ in CPU cost per"
        " packet and in how they queue and drop packets",
        measured,
        candidates=(measured.value,),
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
        # Twice the time, and none at all: how much of the limit was the budget.
        candidates=(min(round(2 * budget, 4), CPU_BUDGET_MAX), None),
    )


def spread_softirq(c: Context) -> Advice | None:
    s = c.subject
    lab = s.config.lab
    if c.finding(Bound.CPU) is None or not s.cores or lab.rps_cpus is not None or lab.queues:
        return None
    hot = max(s.cores, key=s.busy)
    softirq = s.metrics.get(metric.cpu(hot, "softirq"), 0.0)
    idle = {core: s.metrics[metric.cpu(core, "idle")] for core in s.cores if core != hot}
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
        candidates=(mask,),
    )


def more_queues(c: Context) -> Advice | None:
    """One queue on one core: as many queues as cores, each on a core of its own."""
    verdict, s = c.diagnosis.verdict, c.subject
    if verdict.bound is not Bound.SINGLE_QUEUE:
        return None
    if s.config.lab.wan.encapsulation is WanEncapsulation.PPPOE:
        return Advice(
            None,
            "spread the PPPoE session's receive work over the cores in software, since no"
            " NIC queue can: RPS on the ppp device (Linux: rps_cpus of its rx-0; pfSense:"
            " net.isr.dispatch=deferred), or terminate PPPoE on a device with more cores",
            verdict.summary,
        )
    queues = s.config.lab.queues or 1
    return Advice(
        "lab.queues",
        f"give each link {len(s.cores)} queues, one per core (on a router: the NIC's RSS"
        " queues, or RPS across its cores where the NIC or a PPPoE WAN has one queue)",
        verdict.summary,
        c.measured("lab.queues", lambda v: (v or 1) > queues),
        candidates=(len(s.cores),),
    )


def raise_role_budget(c: Context) -> Advice | None:
    cpu = c.finding(Bound.CPU)
    if cpu is None or cpu.subject is None:
        return None
    budget = c.subject.config.lab.budget.given().get(cpu.subject)
    if budget is None or not any(e.name == f"lab.budget.{cpu.subject}" for e in cpu.evidence):
        return None
    setting = f"lab.budget.{cpu.subject}"
    return Advice(
        setting,
        f"give the {cpu.subject} more CPU time (on a router: a faster or unthrottled CPU,"
        " the performance governor)",
        cpu.summary,
        c.measured(setting, lambda v: v is None or v > budget),
        candidates=(min(round(2 * budget, 4), CPU_BUDGET_MAX), None),
    )


def accelerated_crypto(c: Context) -> Advice | None:
    cpu = c.finding(Bound.CPU)
    if cpu is None or not encrypting(c.subject.resolved):
        return None
    flags = c.subject.environment.get("cpu_flags")
    if flags is None:
        return None
    cipher = c.subject.resolved.tunnel_cipher
    needed, extra = CIPHER_FLAGS.get(str(cipher), ANY_CIPHER)
    present = [CRYPTO_FLAGS[flag] for flag in needed + extra if flag in flags]
    missing = [CRYPTO_FLAGS[flag] for flag in needed if flag not in flags]
    if cipher not in CIPHER_FLAGS and present:
        missing = []  # some cipher is accelerated: which one runs is not recorded
    which = f" for {cipher}" if cipher in CIPHER_FLAGS else ""
    if not missing:
        because = f"{cpu.summary}; the CPU offers {', '.join(present)}{which}"
        suggestion = (
            "check that the tunnel's crypto uses the CPU's vector instructions"
            " (a VM may hide them from the guest kernel)"
        )
    else:
        because = f"{cpu.summary}; the CPU lacks {', '.join(missing)}{which}"
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
    if threaded_generator(s):
        if generator_cores(s) >= len(s.cores):
            return None  # its threads already keep every core busy: more of them cannot help
        return Advice(
            "traffic.streams",
            "spread the load over more streams (iperf2 runs each in a thread of its own)",
            generator.summary,
            c.measured("traffic.streams", lambda v: v > s.config.traffic.streams),
            candidates=more_streams(s.config.traffic.streams),
        )
    if s.config.traffic.streams > 1 and s.resolved.single_process:
        return Advice(
            "traffic.stream_mode",
            "run one generator process per stream (stream_mode = processes)",
            generator.summary,
            c.measured("traffic.stream_mode", lambda v: v == StreamMode.PROCESSES.value),
            candidates=(StreamMode.PROCESSES.value,),
        )
    return Advice(
        "traffic.streams",
        "spread the load over several streams, each in its own generator process",
        generator.summary,
        c.measured("traffic.streams", lambda v: v > s.config.traffic.streams),
        candidates=more_streams(s.config.traffic.streams),
    )


def several_flows(c: Context) -> Advice | None:
    s = c.subject
    if s.config.traffic.streams != 1 or c.diagnosis.verdict.bound not in (
        Bound.CPU,
        Bound.UNDETERMINED,
    ):
        return None
    if any(e.name.startswith(BUDGETS) for e in c.diagnosis.verdict.evidence):
        return None  # a CPU budget caps every flow of what it holds together
    return Advice(
        "traffic.streams",
        "use several flows: one flow is processed on one core at a time",
        c.diagnosis.verdict.summary,
        c.measured("traffic.streams", lambda v: v > 1),
        candidates=more_streams(1),
    )


def _queue_loss(c: Context) -> Finding | None:
    """Drops at a queue, or a link-bound verdict whose runs lost packets; None when the
    queue is below one bandwidth-delay product, which :func:`queue_for_bdp` advises on
    (a fair queue does not let one flow fill the link, and the limit it needs is known)."""
    if c.finding(Bound.QUEUE_BELOW_BDP) is not None:
        return None
    return c.finding(Bound.QUEUE_DROPS, Bound.LINK_LOSSY)


def fair_queue(c: Context) -> Advice | None:
    finding = _queue_loss(c) or c.finding(Bound.LATENCY)
    queue = c.subject.config.lab.wan.queue
    if finding is None or (queue.value if queue else None) not in FIFOS:
        return None
    if c.subject.config.lab.wan.rate is None:
        return None
    found = [c.available("qdiscs", q, q) for q in ADVISED_QUEUES]
    usable = [a.what for a in found if a.state == "yes"]
    if usable:
        can = Availability(" or ".join(usable), "yes")
    elif all(a.state == "no" for a in found):
        refusals = "; ".join(f"{a.what}: {a.detail}" for a in found)
        can = Availability("fq_codel and cake", "no", refusals)
    else:  # not recorded, or not probed: with the reason
        unknown = next(a for a in found if a.state != "no")
        can = Availability("fq_codel and cake", unknown.state, unknown.detail)
    queues = " or ".join(usable or ADVISED_QUEUES)
    return Advice(
        "lab.wan.queue",
        f"replace the FIFO with a fair, delay-managing queue ({queues})",
        finding.summary,
        c.measured("lab.wan.queue", lambda v: v in FAIR_QUEUES),
        can,
        ADVISED_QUEUES,
        goal="both",
    )


def larger_queue(c: Context) -> Advice | None:
    """A queue that overflowed holds too few packets for its flows. Not fq_codel's or
    cake's drops: they drop by design, to keep each flow's wait short, long before their
    limit (in a Debian-kernel guest at 20 Mbit/s and a 20 ms round trip, 32-38
    retransmits a run with 1000 packets allowed), so a higher limit changes nothing."""
    finding = _queue_loss(c)
    wan = c.subject.config.lab.wan
    if finding is None or wan.rate is None or c.finding(Bound.LATENCY) is not None:
        return None
    if wan.queue is not None and wan.queue.value in ADVISED_QUEUES:
        return None
    return Advice(
        "lab.wan.queue_limit",
        f"a queue of {wan.queue_limit} packets is too small for this many flows; raise it",
        finding.summary,
        c.measured("lab.wan.queue_limit", lambda v: v > wan.queue_limit),
        candidates=tuple(
            sorted({min(wan.queue_limit * f, QUEUE_LIMIT_MAX) for f in (4, 16)} - {wan.queue_limit})
        ),
    )


def queue_for_bdp(c: Context) -> Advice | None:
    """A drop-tail queue below one bandwidth-delay product starves one TCP flow: a queue
    of one product (and twice it, for a margin) is what to measure. Several flows need
    less each, so that is named too."""
    finding = c.finding(Bound.QUEUE_BELOW_BDP)
    wan = c.subject.config.lab.wan
    if finding is None:
        return None
    figures = {e.name: e.value for e in finding.evidence}
    packets = math.ceil(figures["bandwidth-delay product"] / figures["full-sized frame"])
    candidates = sorted({min(packets * f, QUEUE_LIMIT_MAX) for f in (1, 2)} - {wan.queue_limit})
    return Advice(
        "lab.wan.queue_limit",
        f"give the bottleneck queue at least one bandwidth-delay product ({packets:,} packets"
        " of full size), or carry the traffic in several flows",
        finding.summary,
        c.measured("lab.wan.queue_limit", lambda v: v > wan.queue_limit),
        candidates=tuple(v for v in candidates if v > wan.queue_limit),
    )


def shorter_queue(c: Context) -> Advice | None:
    """Packets wait in a FIFO up to its limit times their size over the rate: a shorter
    one bounds the delay, at a risk to goodput with few flows (the measurement decides;
    a goodput comparison cannot judge it, so none is cited)."""
    latency = c.finding(Bound.LATENCY)
    wan = c.subject.config.lab.wan
    if latency is None or wan.rate is None or (wan.queue.value if wan.queue else None) not in FIFOS:
        return None
    limit = wan.queue_limit
    shorter = tuple(sorted({max(limit // f, QUEUE_LIMIT_MIN) for f in (4, 16)} - {limit}))
    if not shorter:
        return None
    wait_ms = limit * wan.mtu * 8 / wan.rate * 1000
    return Advice(
        "lab.wan.queue_limit",
        f"shorten the queue: {limit} packets of up to {wan.mtu} bytes wait up to"
        f" {wait_ms:,.0f} ms at {human_rate(wan.rate)}",
        latency.summary,
        candidates=tuple(reversed(shorter)),
        goal="latency",
    )


def dut_receive_spread(c: Context) -> Advice | None:
    """Real hosts: the DUT's receive work on one core while another has room. The lab's
    settings do not reach a real router; the router's own do."""
    s = c.subject
    owner = dut(s)
    if owner is None or (c.finding(Bound.SINGLE_QUEUE) or c.finding(Bound.CPU)) is None:
        return None
    hot = max(s.cores, key=s.busy)
    softirq = s.metrics.get(metric.cpu(hot, "softirq"), 0.0)
    spare = [
        core
        for core in s.cores
        if core != hot and s.metrics[metric.cpu(core, "idle")] >= RPS_IDLE_PCT
    ]
    if s.busy(hot) < SATURATED_PCT or softirq < RPS_SOFTIRQ_PCT or not spare:
        return None
    mask = format(sum(1 << core for core in s.cores), "x")
    return Advice(
        None,
        f"on {owner}: spread receive work over its cores: more NIC queues (`ethtool -L DEV"
        f" combined {len(s.cores)}`) or RPS (`echo {mask} >"
        " /sys/class/net/DEV/queues/rx-0/rps_cpus`"
        " on the interfaces the traffic arrives on; OpenWrt: packet steering)",
        f"{core_name(s, hot)} spends {softirq:.0f}% in softirq while cpu{spare[0]} is"
        f" {s.metrics[metric.cpu(spare[0], 'idle')]:.0f}% idle",
    )


#: The /proc/crypto algorithms each cipher's work goes through.
CIPHER_ALGORITHMS = {
    "chacha20-poly1305": (
        "chacha20",
        "rfc7539(chacha20,poly1305)",
        "rfc7539esp(chacha20,poly1305)",
    ),
    "aes-256-gcm": ("gcm(aes)", "rfc4106(gcm(aes))", "aes"),
}


def dut_crypto_driver(c: Context) -> Advice | None:
    """Real hosts: which driver the DUT's kernel picks for the tunnel's cipher (the
    highest priority in /proc/crypto), when the DUT is CPU-bound on an encrypting tunnel."""
    s = c.subject
    owner, cpu = dut(s), c.finding(Bound.CPU)
    drivers = (s.resolved.remote or {}).get("crypto_drivers") or {}
    if owner is None or cpu is None or not drivers:
        return None
    kind = s.config.tunnel.kind.value
    cipher = s.resolved.tunnel_cipher or ("chacha20-poly1305" if kind == "wireguard" else None)
    if kind == "none" or cipher not in CIPHER_ALGORITHMS:
        return None
    served = [(n, drivers[n]["driver"]) for n in CIPHER_ALGORITHMS[cipher] if n in drivers]
    if not served:
        return None
    shown = ", ".join(f"{n} by {d}" for n, d in served)
    generic = [d for _, d in served if "generic" in d]
    if generic:
        return Advice(
            None,
            f"on {owner}: load an accelerated driver for {cipher} (its kernel picks {generic[0]},"
            " the portable C code: look for the CPU's module, e.g. chacha-neon, aes-ce, or the"
            " SoC's crypto engine, and check /proc/crypto's priorities)",
            f"{cpu.summary}; {owner}'s kernel serves {shown}",
        )
    return Advice(
        None,
        f"on {owner}: the kernel already uses accelerated drivers for {cipher}; a faster CPU,"
        " or a cipher its crypto engine offloads, is what is left",
        f"{cpu.summary}; {owner}'s kernel serves {shown}",
    )


RULES: tuple[AdviceRule, ...] = (
    kernel_wireguard,
    kernel_esp,
    openvpn_dco,
    faster_wireguard,
    raise_cpu_budget,
    raise_role_budget,
    more_queues,
    generator_processes,
    several_flows,
    spread_softirq,
    fair_queue,
    larger_queue,
    queue_for_bdp,
    shorter_queue,
    accelerated_crypto,
    frequency_scaling,
    dut_receive_spread,
    dut_crypto_driver,
)


# Measured gains first, then undecided measurements, then hints, refuted ones last.
_ORDER = {"gain": 0, "too few runs": 1, None: 2, "no difference": 3, "slower": 3}


def advise(subject: Subject, diagnosis: Diagnosis, run: Sequence[Sibling]) -> list[Advice]:
    """Every suggestion for one configuration: measured gains first, refuted ones last."""
    if diagnosis.verdict.bound is Bound.EMULATED:
        return []  # an emulated CPU's limits say nothing of a real router's settings
    context = Context(subject, diagnosis, run)
    found = [a for a in (rule(context) for rule in RULES) if a is not None]
    if dut(subject) is not None:
        # A real router has none of the lab's settings; its own are advised instead.
        found = [a for a in found if not (a.setting or "").startswith("lab.")]
    return sorted(found, key=lambda a: _ORDER[a.measured.outcome if a.measured else None])
