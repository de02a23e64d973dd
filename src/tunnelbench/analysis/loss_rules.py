"""What TCP and UDP lost, and what only looked lost: the senders' retransmits, with the
loss the plan asked for named as such, and packets that arrived out of order, which TCP
takes for lost ones (its own verdict, ``reordering``, since nothing was lost).

Reordering is judged run by run: kernel ESP under gretap had one run with 0 drops, 222
retransmits, 129 reorder events and 0 retransmissions lost again, and one lossy run; their
medians read as loss and the reordering was never named. Where some runs reordered and
others lost packets, the loss findings are taken over the lossy runs alone
(:func:`lossy_runs`) and say so, and the reordering finding says in how many runs.
"""

import math
from dataclasses import dataclass, replace

from tunnelbench.analysis import drop_sites
from tunnelbench.analysis.ceiling import TCP_HEADER, TCP_TIMESTAMPS
from tunnelbench.analysis.verdicts import Bound, Evidence, Finding, Subject, medians
from tunnelbench.kinds import Direction, Protocol
from tunnelbench.model import metrics as metric
from tunnelbench.model.encapsulation import IP_HEADER
from tunnelbench.model.wan import format_pct

RETRANSMIT_HEAVY_PCT = 1.0  # retransmitted segments per segment sent
UDP_LOSS_PCT = 1.0
# The senders' reorder detections (TCPSACKReorder, TCPTSReorder, TCPRenoReorder) that
# make reordering a finding: the lab's FIFOs read 0 (with or without drops), and ESP that
# was called loss-heavy counted 260-347 a run with no packet dropped.
REORDER_EVENTS_MIN = 10
# The share of their segments the senders retransmitted, in one run, from which reordering
# is named: below it the late segments cost little. The lab's unshaped veth baselines
# count 0.03-0.12% with hundreds of reorder events and nothing dropped.
REORDER_SHARE_PCT = 0.5
# Mathis et al. (1997): a TCP flow losing a share p of its segments runs at about
# MSS / RTT * C / sqrt(p), C = sqrt(3/2) for periodic loss; the kernel suite measures
# C = 1.12-1.29 under netem's random loss. A share below RETRANSMIT_HEAVY_PCT still
# holds a flow whose round trip is long (0.65% at 42 ms allows 4.2 Mbit/s): loss is the
# cause where the rate it allows is within MATHIS_EXPLAINS of the goodput measured. The
# model's premise is loss that does not depend on the flow's own rate, as the loss a plan
# asks for (lab.wan.loss); a flow overrunning a queue or a socket makes its own losses,
# and there the retransmit share alone is judged.
MATHIS_C = 1.22
MATHIS_EXPLAINS = 1.5


def retransmit_source(s: Subject) -> tuple[str, str] | None:
    """The per-run retransmit metric and how to name its source: the kernel's count over
    the measured window (``tcp.window.retrans_segs``), else the generator's own count
    (runs recorded before the window counters); None when neither was recorded."""
    if metric.KERNEL_RETRANSMITS.name in s.metrics:
        return metric.KERNEL_RETRANSMITS.name, "the kernel's count"
    if metric.RETRANSMITS.name in s.metrics:
        return metric.RETRANSMITS.name, f"{s.config.traffic.generator.value}'s count"
    return None


def senders(s: Subject) -> list[str]:
    chain_ends = ("client", "server")
    if s.config.traffic.direction is Direction.UPLOAD:
        return [chain_ends[0]]
    if s.config.traffic.direction is Direction.DOWNLOAD:
        return [chain_ends[1]]
    return list(chain_ends)


def retransmit_share(s: Subject) -> tuple[float, float, float] | None:
    """(share %, retransmitted, sent) of the senders' segments: over the measured window
    when the window counters were recorded, else over the whole trial; None without the
    senders' own counters (a share would be a guess).

    Sent is every segment TCP put out: the kernel's ``OutSegs`` counts new data only (not
    a retransmission), so a sender whose own queue dropped its retransmissions again and
    again read "362% of TCP segments were retransmitted (1,943 of 536)" when divided by
    it alone."""
    roles = senders(s)
    for window in (True, False):
        retrans = [s.metrics.get(metric.tcp(r, "retrans_segs", window=window)) for r in roles]
        sent = [s.metrics.get(metric.tcp(r, "out_segs", window=window)) for r in roles]
        if any(v is None for v in retrans + sent):
            continue
        total_retrans = sum(v for v in retrans if v is not None)
        total_sent = sum(v for v in sent if v is not None) + total_retrans
        if total_sent > 0:
            return 100.0 * total_retrans / total_sent, total_retrans, total_sent
    return None


@dataclass(frozen=True)
class Reordered:
    """TCP's retransmits that the path's drops do not account for, with the senders'
    own count of packets that arrived out of order."""

    events: float  # the senders' reorder detections
    share: float  # % of their segments retransmitted
    retransmitted: float
    sent: float
    lost: float  # packets every recorded counter dropped, netem's emulated loss included
    lost_again: float  # retransmissions TCP found lost in turn (TCPLostRetransmit)
    runs: int = 1  # the runs that reordered...
    of: int = 1  # ...of the configuration's successful runs

    @property
    def every_run(self) -> bool:
        return self.runs == self.of


def _senders_count(s: Subject, name: str) -> float | None:
    """The senders' TCP counter ``name`` (``tcp[.window].<role>.<name>``): over the
    measured window when recorded, else over the whole trial; None without it."""
    roles = senders(s)
    for window in (True, False):
        values = [s.metrics.get(metric.tcp(role, name, window=window)) for role in roles]
        if all(v is not None for v in values):
            return sum(v for v in values if v is not None)
    return None


def _reordered(s: Subject) -> Reordered | None:
    """Retransmits that are reordering, not loss, in ``s``'s metrics (one run's, or
    medians). The senders counted at least :data:`REORDER_EVENTS_MIN` reorder events and
    retransmitted at least :data:`REORDER_SHARE_PCT` of their segments, and neither sign
    of real loss accounts for them: everything the probes count as dropped (queues,
    interfaces, netem's emulated loss) is less than half the retransmits, and TCP found
    few of its retransmissions lost in turn. A path that loses a share p of its packets
    loses about p of the retransmissions too (boringtun here: 22% retransmitted, 21% of
    those lost again, with no counter dropping anything: loss where no probe looks, such
    as a socket's buffer); a late segment's retransmission is not lost, so reordering
    alone leaves that count near 0. Fewer than half of p is taken as reordering. None when
    any of these figures was not recorded."""
    if s.config.traffic.protocol is not Protocol.TCP:
        return None
    events = _senders_count(s, "reorder")
    lost_again = _senders_count(s, "lost_retransmit")
    found = retransmit_share(s)
    dropped = drop_sites.dropped(s.metrics)
    if events is None or lost_again is None or found is None or dropped is None:
        return None
    share, retransmitted, sent = found
    lost = dropped + drop_sites.netem_dropped(s.metrics)
    if events < REORDER_EVENTS_MIN or share < REORDER_SHARE_PCT or lost * 2 >= retransmitted:
        return None
    if lost_again >= retransmitted * share / 100 / 2:
        return None
    return Reordered(events, share, retransmitted, sent, lost, lost_again)


def _of_runs(s: Subject, runs: list[dict[str, float]]) -> Subject:
    """``s`` as if only ``runs`` had been measured: their medians and themselves."""
    return replace(s, metrics=medians(runs), runs=tuple(runs))


def reordering_runs(s: Subject) -> list[int]:
    """The indices of :attr:`Subject.runs` whose retransmits were reordering, not loss
    (:func:`_reordered` of each run alone); without runs, ``[0]`` when the medians
    were."""
    if not s.runs:
        return [0] if _reordered(s) is not None else []
    return [i for i, run in enumerate(s.runs) if _reordered(_of_runs(s, [run])) is not None]


def reordered(s: Subject) -> Reordered | None:
    """The reordering of the runs that reordered (:func:`reordering_runs`), from their
    medians, with in how many of the runs; None when no run did."""
    late = reordering_runs(s)
    if not late:
        return None
    if not s.runs:
        return _reordered(s)
    runs = [s.runs[i] for i in late]
    found = _reordered(_of_runs(s, runs)) or _reordered(_of_runs(s, runs[:1]))
    assert found is not None  # each of them reordered on its own
    return replace(found, runs=len(late), of=len(s.runs))


def lossy_runs(s: Subject) -> tuple[Subject, str] | None:
    """Where some runs reordered and the others did not: ``s`` over the others alone,
    with a clause saying so, for the rules about loss (a queue's drops, retransmits), so
    that a reordering run is never folded into a loss verdict. None when the runs agree."""
    late = reordering_runs(s)
    if not late or not s.runs or len(late) == len(s.runs):
        return None
    others = [run for i, run in enumerate(s.runs) if i not in late]
    n = len(s.runs)
    clause = (
        f" (in {len(others)} of {n} runs; the other {len(late)} retransmitted segments that"
        f" came late, not lost: reordering)"
    )
    return _of_runs(s, others), clause


def reordering(s: Subject) -> Finding | None:
    """Packets that arrive out of order, which TCP takes for lost ones: a sender that
    sees later segments acknowledged first retransmits the "missing" one and shrinks its
    window, as it would for a loss. Parallel per-packet crypto (ESP spread over several
    cores) and several paths reorder; a FIFO does not. Its own verdict, apart from
    ``loss-heavy``, since the cure is different: nothing was lost."""
    found = reordered(s)
    if found is None:
        return None
    evidence = [
        Evidence("runs that reordered", found.runs, ""),
        Evidence("successful runs", found.of, ""),
        Evidence("reorder events (the senders' count)", found.events, ""),
        Evidence("retransmitted segments", found.retransmitted, ""),
        Evidence("segments sent", found.sent, ""),
        Evidence("retransmit share", found.share, "%"),
        Evidence("packets dropped", found.lost, "packets"),
        Evidence("retransmissions lost again", found.lost_again, ""),
    ]
    asked = ""
    if reorder := s.config.lab.wan.reorder:
        evidence.append(Evidence("lab.wan.reorder", reorder, "%"))
        asked = (
            f", with the WAN set to reorder {format_pct(reorder)} of the packets at each end"
            " (lab.wan.reorder)"
        )
    where = "" if found.every_run else f"in {found.runs} of {found.of} runs, "
    return Finding(
        Bound.REORDERING,
        f"{where}packets arrived out of order: TCP's senders counted {found.events:,.0f} reorder"
        f" events and retransmitted {found.share:.2f}% of their segments"
        f" ({found.retransmitted:,.0f} of {found.sent:,.0f}) while {found.lost:,.0f} packets"
        f" were dropped on the way and {found.lost_again:,.0f} retransmissions were lost in"
        f" turn, so most retransmits were of segments that came late, not lost{asked}",
        tuple(evidence),
        subject="packet order",
    )


def loss_heavy(s: Subject) -> Finding | None:
    """UDP datagrams lost, or TCP segments retransmitted, beyond what a path at its limit
    shows; not when the retransmits are reordering (:func:`reordering`), unless the
    configuration asked for loss besides."""
    if s.config.traffic.protocol is Protocol.UDP:
        lost = s.metrics.get(metric.UDP_LOST_PCT.name)
        if lost is None or lost < UDP_LOSS_PCT:
            return None
        return Finding(
            Bound.LOSS,
            f"{lost:.2f}% of UDP datagrams were lost",
            (Evidence("UDP loss", lost, "%"),),
        )
    found = retransmit_share(s)
    if found is None:
        return None
    share, total_retrans, total_sent = found
    allowed = mathis_bps(s, share) if s.config.lab.wan.loss else None
    explained = allowed is not None and allowed <= MATHIS_EXPLAINS * s.goodput_bps
    if share < RETRANSMIT_HEAVY_PCT and not explained:
        return None
    late = reordered(s)
    if late is not None and late.every_run and not s.config.lab.wan.loss:
        return None
    evidence = [
        Evidence("retransmitted segments", total_retrans, ""),
        Evidence("segments sent", total_sent, ""),
        Evidence("retransmit share", share, "%"),
    ]
    held = ""
    if explained and allowed is not None:
        rtt = s.metrics[metric.RTT_LOADED.name]
        evidence.append(Evidence("rate TCP's loss allows (Mathis)", allowed / 1e6, "Mbit/s"))
        held = (
            f"; at a {rtt:,.1f} ms round trip that loss allows TCP about"
            f" {allowed / 1e6:,.1f} Mbit/s (Mathis: MSS / RTT x {MATHIS_C} / sqrt(p)"
            f"{' per flow' if s.config.traffic.streams > 1 else ''}), which accounts for the"
            f" {s.goodput_bps / 1e6:,.1f} measured"
        )
    return Finding(
        Bound.LOSS,
        f"{share:.2f}% of TCP segments were retransmitted"
        f" ({total_retrans:,.0f} of {total_sent:,.0f}){_emulated_loss(s, evidence)}{held}",
        tuple(evidence),
    )


def segment_bytes(s: Subject) -> int:
    """A full TCP segment's payload (the MSS) on the path: the narrowest of the LAN, the
    WAN and the tunnel, less the inner IP and TCP headers with timestamps."""
    lab = s.config.lab
    mtu = min(lab.lan_mtu, lab.wan.ip_mtu, s.resolved.setup.mtu or lab.wan.ip_mtu)
    return mtu - IP_HEADER[s.config.traffic.family] - TCP_HEADER - TCP_TIMESTAMPS


def mathis_bps(s: Subject, share_pct: float) -> float | None:
    """The goodput (bit/s) Mathis' model allows the configuration's flows at a loss of
    ``share_pct`` % and the loaded round trip measured; None without a loss or an RTT."""
    rtt_ms = s.metrics.get(metric.RTT_LOADED.name)
    if share_pct <= 0 or not rtt_ms:
        return None
    per_flow = segment_bytes(s) * 8 / (rtt_ms / 1000) * MATHIS_C / math.sqrt(share_pct / 100)
    return per_flow * s.config.traffic.streams


def _emulated_loss(s: Subject, evidence: list[Evidence]) -> str:
    """What the configuration's own loss (``lab.wan.loss``) accounts for, as a clause
    (and its evidence): loss asked for is not a fault to fix."""
    loss = s.config.lab.wan.loss
    if not loss:
        return ""
    evidence.append(Evidence("lab.wan.loss", loss, "%"))
    dropped = metric.device_names(s.metrics, "qdisc", "netem_drops")
    counted = ""
    if dropped:
        total = sum(s.metrics[n] for n in dropped)
        evidence.append(Evidence("netem drops", total, "packets"))
        counted = f"; netem dropped {total:,.0f} packets"
    return (
        f", with the WAN set to lose {format_pct(loss)} of the packets at each end"
        f" (lab.wan.loss{counted})"
    )
