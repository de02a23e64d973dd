"""Turns a diagnosis into concrete suggestions, each naming the setting to change.

A suggestion cites the evidence that triggered it, and a measured alternative replaces
the generic hint (:mod:`tunnelbench.analysis.suggestion` says how it is judged).

Advice respects what this machine can do: a suggestion that needs a kernel feature
(kernel WireGuard, fq_codel or cake, kernel ESP, OpenVPN's DCO) reads the capabilities
the run recorded (:func:`tunnelbench.bench.environment.capability_record`) and, where the
kernel lacks it, says so with the kernel's reason ("not available on this kernel (...);
on a kernel with it: ..."). A run recorded before capabilities were says "availability
not recorded".

Advice follows the cause the diagnosis named, not a near one: queue advice is for the
queue that dropped (:mod:`.queue_advice`); a CPU limit the lab set (offloads off) is
advised as the lab's setting, never the router's; and a crypto driver is advised only
for a tunnel whose kind declares that its crypto goes through the kernel's crypto API.
"""

import re
from collections.abc import Sequence

from tunnelbench.analysis.diagnosis import (
    SATURATED_PCT,
    Bound,
    Diagnosis,
    Subject,
    core_name,
    dut,
    generator_cores,
    threaded_generator,
)
from tunnelbench.analysis.lab_limits import lab_limit
from tunnelbench.analysis.queue_advice import (
    fair_queue,
    larger_queue,
    queue_for_bdp,
    shorter_queue,
    tunnel_queue,
)
from tunnelbench.analysis.suggestion import Advice as Advice
from tunnelbench.analysis.suggestion import AdviceRule, Context, more_streams
from tunnelbench.analysis.suggestion import Availability as Availability
from tunnelbench.analysis.suggestion import Measured as Measured
from tunnelbench.analysis.suggestion import Sibling as Sibling
from tunnelbench.analysis.suggestion import availability as availability
from tunnelbench.kinds import Cipher, StreamMode, WanEncapsulation
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import CPU_BUDGET_MAX
from tunnelbench.model.records import Resolved

# Another userspace implementation this much faster is worth switching to (CPU-bound
# results vary ~10% run to run here).
FASTER_PCT = 10.0
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


def encrypting(resolved: Resolved) -> bool:
    """Whether the trial's packets were encrypted, as its tunnel kind declared: the kind's
    own cipher (WireGuard, OpenVPN, IPsec), or ESP protecting an unencrypted kind."""
    return resolved.tunnel is not None and resolved.tunnel.encrypts


def userspace(resolved: Resolved) -> bool:
    """Whether the trial's data path (encryption or encapsulation) ran in a userspace
    process, as its kind declared."""
    return resolved.tunnel is not None and resolved.tunnel.userspace


def kernel_data_path(c: Context) -> Advice | None:
    """A userspace data path held the traffic on a CPU where its kind declares a kernel
    one beside it (kernel WireGuard for wireguard-go, the kernel's ESP for libipsec,
    ovpn-dco for openvpn): say so, with whether this machine has it and, where a plan
    setting chooses it, what the run measured with it."""
    cpu = c.finding(Bound.CPU)
    facts = c.subject.resolved.tunnel
    if cpu is None or facts is None or not facts.userspace or facts.kernel_path is None:
        return None
    path = facts.kernel_path
    can = (
        c.available(*path.capability, path.name)
        if path.capability
        else Availability(path.name, "not recorded")
    )
    suggestion = path.suggestion
    if path.not_used and can.state == "yes":
        suggestion += f": this run did not ({path.not_used})"
    value = path.value
    measured = c.measured(path.setting, lambda v: v == value) if path.setting is not None else None
    return Advice(
        path.setting,
        suggestion,
        f"{cpu.summary}; {path.why}",
        measured,
        can,
        (value,) if value is not None else (),
    )


def faster_userspace(c: Context) -> Advice | None:
    """Userspace implementations differ in CPU cost per packet and in how they queue and
    drop packets: when this run measured another one clearly faster with every other
    setting equal, say so, whatever limited this one."""
    implementation = c.subject.resolved.tunnel_implementation
    facts = c.subject.resolved.tunnel
    if facts is None or not facts.userspace:
        return None
    others = facts.userspace_implementations
    measured = c.measured("tunnel.implementation", lambda v: v in others and v != implementation)
    if measured is None or measured.change_pct < FASTER_PCT or measured.outcome == "no difference":
        return None
    kernel = facts.kernel_path
    return Advice(
        "tunnel.implementation",
        f"use {measured.value} rather than {implementation}"
        + (f" where {kernel.name} is not an option" if kernel else ""),
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
    if c.diagnosis.verdict.lab_setting is not None:
        return None  # the lab's limit: lab_offloads advises it
    if any(e.name.startswith(BUDGETS) for e in c.diagnosis.verdict.evidence):
        return None  # a CPU budget caps every flow of what it holds together
    return Advice(
        "traffic.streams",
        "use several flows: one flow is processed on one core at a time",
        c.diagnosis.verdict.summary,
        c.measured("traffic.streams", lambda v: v > 1),
        candidates=more_streams(1),
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


#: A /proc/crypto driver built of the portable C code: ``aes-generic``, ``chacha20-generic``,
#: ``gcm_base(ctr(aes-generic),ghash-generic)``; not Intel's ``generic-gcm-aesni``, which
#: is AES-NI despite its name.
PORTABLE_DRIVER = re.compile(r"-generic\b")
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
    highest priority in /proc/crypto), when the DUT is CPU-bound on a tunnel whose
    crypto goes through the kernel's crypto API, as its kind declared (ESP in the
    kernel, OpenVPN's DCO). Not WireGuard: the kernel's calls lib/crypto directly (its
    own choice of the CPU's instructions) and a userspace one does its own crypto, so no
    /proc/crypto driver is theirs to load."""
    s = c.subject
    owner, cpu = dut(s), c.finding(Bound.CPU)
    drivers = s.resolved.remote.crypto_drivers if s.resolved.remote else {}
    facts = s.resolved.tunnel
    if owner is None or cpu is None or not drivers or facts is None:
        return None
    cipher = s.resolved.tunnel_cipher
    if not facts.kernel_crypto_api or cipher not in CIPHER_ALGORITHMS:
        return None
    served = [(n, drivers[n].driver) for n in CIPHER_ALGORITHMS[cipher] if n in drivers]
    if not served:
        return None
    shown = ", ".join(f"{n} by {d}" for n, d in served)
    generic = [d for _, d in served if PORTABLE_DRIVER.search(d)]
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


def lab_offloads(c: Context) -> Advice | None:
    """A CPU limit the lab set (:mod:`tunnelbench.analysis.lab_limits`): its offloads
    off, every host did a wire packet's work per packet, which says nothing of a router
    with its NIC's offloads. The advice is the lab setting, never the router's (the CPU
    advice rests on findings the lab did not set)."""
    marked = next((f for f in c.diagnosis.findings if f.lab_setting is not None), None)
    limit = lab_limit(c.subject.config, c.subject.resolved)
    if marked is None or limit is None:
        return None
    if limit.asked:
        how = f"drop {', '.join(limit.asked)} from the plan"
    else:
        how = "set lab.offloads.gro, gso and tso to true"
    return Advice(
        None,
        f"measure with the offloads on, as a router's NIC has them ({how}); where a queue"
        " must count wire packets, ask for that at the bottleneck alone, not on every host",
        marked.summary,
    )


def reordered_packets(c: Context) -> Advice | None:
    """Packets reordered on the way (the ``reordering`` finding): TCP takes a late
    packet for a lost one. Not where the plan asked for it (``lab.wan.reorder``)."""
    finding = c.finding(Bound.REORDERING)
    if finding is None or c.subject.config.lab.wan.reorder:
        return None
    return Advice(
        None,
        "keep each flow's packets in order through the tunnel: processing one flow's"
        " packets on several cores at once (parallel crypto, several daemon threads) or"
        " sending them over several paths reorders them",
        finding.summary,
    )


RULES: tuple[AdviceRule, ...] = (
    lab_offloads,
    kernel_data_path,
    faster_userspace,
    raise_cpu_budget,
    raise_role_budget,
    more_queues,
    generator_processes,
    several_flows,
    spread_softirq,
    tunnel_queue,
    fair_queue,
    larger_queue,
    queue_for_bdp,
    shorter_queue,
    reordered_packets,
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
