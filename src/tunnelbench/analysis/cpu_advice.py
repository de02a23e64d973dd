"""Advice where a CPU held the traffic: the kernel's data path beside a userspace one, a
faster implementation, the CPU budgets, receive work spread over cores, the CPU's crypto
instructions and its clock; and a CPU limit the lab itself set (offloads off), advised as
the lab's setting."""

from tunnelbench.analysis.diagnosis import (
    SATURATED_PCT,
    Bound,
)
from tunnelbench.analysis.lab_limits import lab_limit
from tunnelbench.analysis.suggestion import (
    Advice,
    Availability,
    Context,
)
from tunnelbench.kinds import Cipher, WanEncapsulation
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
    implementation = c.subject.resolved.setup.implementation
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
    flags = c.subject.environment.cpu_flags
    if flags is None:
        return None
    cipher = c.subject.resolved.setup.cipher
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
    governor = c.subject.environment.cpu_governor
    if cpu is None or governor in (None, "performance"):
        return None  # without cpufreq (most VMs) there is nothing to check
    return Advice(
        None,
        'set the CPU frequency governor to "performance" for benchmarking',
        f"{cpu.summary}; the governor is {governor!r}, which lowers the clock between bursts",
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
