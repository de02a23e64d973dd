"""Advice for a real router (a run on real hosts), in its own terms: its receive work
spread over its cores, the crypto driver its kernel picks for the tunnel's cipher. The
lab's settings do not reach it."""

import re

from tunnelbench.analysis.cpu_advice import RPS_IDLE_PCT, RPS_SOFTIRQ_PCT
from tunnelbench.analysis.diagnosis import (
    SATURATED_PCT,
    Bound,
    core_name,
    dut,
)
from tunnelbench.analysis.suggestion import (
    Advice,
    Context,
)
from tunnelbench.model import metrics as metric


def dut_receive_spread(c: Context) -> Advice | None:
    """Real hosts: the DUT's receive work on one core while another has room. The lab's
    settings do not reach a real router; the router's own do."""
    s = c.subject
    owner = dut(s)
    if owner is None or (c.finding(Bound.SINGLE_QUEUE) or c.finding(Bound.CPU)) is None:
        return None
    if not s.cores:  # a black box: its agent's CPU is every core together
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
    cipher = s.resolved.setup.cipher
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
