"""The terminal table of a run: one row per configuration."""

from tunnelbench.analysis.diagnosis import Bound, Finding
from tunnelbench.analysis.stats import Summary, consistency
from tunnelbench.analysis.summary import (
    GENERATOR_RETRANSMITS,
    KERNEL_RETRANSMITS,
    ConfigSummary,
    Latency,
    varying_axes,
)
from tunnelbench.analysis.tuning import ms
from tunnelbench.analysis.verdicts import ABOVE_CEILING_PCT, above_ceiling_pct
from tunnelbench.kinds import Cipher, Protocol, Queue
from tunnelbench.model.plan import LinkSettings, spelt_implementation
from tunnelbench.model.wan import format_pct, format_us
from tunnelbench.report.fit import aligned, fitted, wrap
from tunnelbench.units import mbit

# Axes shown as their own columns when they vary, with a short heading.
AXIS_HEADINGS = {
    "traffic.generator": "generator",
    "traffic.streams": "streams",
    "traffic.direction": "direction",
    "traffic.stream_mode": "mode",
    "traffic.family": "IP",
    "tunnel.mtu": "tun MTU",
    "tunnel.implementation": "impl",
    "tunnel.cpu_budget": "CPU budget",
    "tunnel.cipher": "cipher",
    "tunnel.esp_mode": "ESP mode",
    "tunnel.protection": "protection",
    "traffic.protocol": "proto",
    "traffic.udp_rate": "UDP rate",
    "traffic.congestion": "cc",
    "lab.topology": "topology",
    "lab.lan_mtu": "LAN MTU",
    "lab.wan.mtu": "WAN MTU",
    "lab.wan.rate": "WAN rate",
    "lab.wan.shaper": "shaper",
    "lab.wan.queue": "queue",
    "lab.wan.queue_limit": "limit",
    "lab.wan.queue_bytes": "limit bytes",
    "lab.wan.delay": "delay",
    "lab.wan.jitter": "jitter",
    "lab.wan.loss": "loss",
    "lab.wan.reorder": "reorder",
    "lab.wan.encapsulation": "WAN encap",
    "lab.offloads.gro": "GRO",
    "lab.offloads.gso": "GSO",
    "lab.offloads.tso": "TSO",
    "lab.offloads.roles": "offload roles",
    "lab.rps_cpus": "RPS",
    "lab.placement": "placement",
    "lab.cpus.client": "client cores",
    "lab.cpus.gw": "gw cores",
    "lab.cpus.gwa": "gwa cores",
    "lab.cpus.gwb": "gwb cores",
    "lab.cpus.server": "server cores",
    "lab.budget.client": "client budget",
    "lab.budget.gw": "gw budget",
    "lab.budget.gwa": "gwa budget",
    "lab.budget.gwb": "gwb budget",
    "lab.budget.server": "server budget",
    "lab.queues": "queues",
    "lab.kernel": "kernel",
    "lab.vm.cpus": "vCPUs",
    "lab.vm.memory": "VM MiB",
    "traffic.duration": "duration s",
    "traffic.warmup": "warm-up s",
    "traffic.warmup_max": "warm-up max s",
}
# The round-trip columns: one compact cell in the terminal, three in the reports.
RTT_COLUMN = "RTT ms idle→p95"
RTT_COLUMNS = ("idle RTT ms", "loaded RTT ms (median/p95)", "RTT increase ms")
TEXT_COLUMNS = {
    "tunnel", "generator", "direction", "mode", "topology", "shaper", "impl", "queue", "proto",
    "cc", "offload roles", "busiest core u/s/si", "consistency", "limited by", "cipher",
    "ESP mode", "protection", "placement", "client cores", "gw cores", "gwa cores", "gwb cores",
    "server cores", "kernel", "WAN encap",
}  # fmt: skip
# The verdicts in the width of a terminal column; the reports spell them out.
LIMITED_BY = {
    "above-ceiling": "ABOVE CEILING", "link-bound": "link", "link-bound-lossy": "link, lossy",
    "outside-load": "OUTSIDE LOAD", "steal": "STEAL", "cpu-bound": "CPU",
    "generator-bound": "generator", "queue-below-bdp": "queue < BDP",
    "single-queue": "one queue", "thermal-limit": "THERMAL",
    "queue-drop-bound": "queue drops", "reordering": "reordering", "loss-heavy": "loss",
    "latency-under-load": "latency", "emulated-cpu": "EMULATED CPU",
    "too-few-runs": "no verdict", "undetermined": "undetermined",
}  # fmt: skip


def limited_by(verdict: Finding) -> str:
    """The verdict in a few words; ``CPU (lab)`` where the lab set the limit (offloads
    off: docs/diagnosis.md)."""
    short = LIMITED_BY[verdict.bound.value]
    return f"{short} (lab)" if verdict.lab_setting else short


#: Queues whose ``queue_limit`` is their size in packets (None: a pfifo under the shaper).
PACKET_LIMITED = (None, Queue.PFIFO, Queue.PFIFO_FAST)
#: The limit a plan leaves unset (:class:`~tunnelbench.model.plan.LinkSettings`).
DEFAULT_QUEUE_LIMIT = LinkSettings().queue_limit


def no_queue_limit(wan: LinkSettings) -> bool:
    """Whether a row's packet limit says nothing of its queue: no queue at all (an
    unshaped link with the device's own), cake (which runs unlimited) and bfifo (limited
    in bytes), and fq_codel or fq at the limit a plan leaves unset: a packet limit is a
    FIFO's notion, and "fq_codel 1000" reads as a setting the user made."""
    if wan.rate is None and wan.queue is None:
        return True
    if wan.queue in (Queue.CAKE, Queue.BFIFO):
        return True
    return wan.queue not in PACKET_LIMITED and wan.queue_limit == DEFAULT_QUEUE_LIMIT


def axis_value(summary: ConfigSummary, path: str) -> str:
    # Attribute by attribute: the configuration's to_dict() (dataclasses.asdict) for
    # every cell took 0.3 s of a 20-configuration report.
    value: object = summary.config
    for part in path.split("."):
        value = getattr(value, part)
    wan = summary.config.lab.wan
    if path == "lab.wan.shaper" and wan.rate is None:
        return "none"  # an unshaped link has no shaper, whatever the default names
    if path == "lab.wan.queue_limit" and no_queue_limit(wan):
        return "-"
    if path in ("lab.wan.rate", "traffic.udp_rate"):
        return "-" if value is None else f"{mbit(value):g}M"  # type: ignore[arg-type]
    if path == "tunnel.cpu_budget" or path.startswith("lab.budget."):
        return "-" if value is None else f"{value:.0%}"
    if path in ("lab.wan.delay", "lab.wan.jitter"):
        return "-" if value is None else format_us(value)  # type: ignore[arg-type]
    if path in ("lab.wan.loss", "lab.wan.reorder"):
        return "-" if value is None else format_pct(value)  # type: ignore[arg-type]
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "all"
    if path == "tunnel.mtu" and value is None and summary.resolved.setup.mtu:
        return str(summary.resolved.setup.mtu)
    if path == "tunnel.cipher" and value == Cipher.AUTO:
        return summary.resolved.setup.cipher or "-"  # what auto became
    if path == "tunnel.implementation":
        return spelt_implementation(summary.config.tunnel.implementation)
    return "-" if value is None else str(value)


#: A metric the generator does not report (iperf2's TCP retransmits), as opposed to one
#: that does not apply ("n/a": retransmits of UDP traffic).
NOT_MEASURED = "not measured"
#: Marks a retransmit figure that is the generator's own count (a run recorded before the
#: kernel's window counters), so that a table never mixes two sources silently.
GENERATOR_MARK = "*"


def retransmits_cell(s: ConfigSummary) -> str:
    """The median retransmits per run, from the kernel's window counters, or marked with
    :data:`GENERATOR_MARK` when they are the generator's count; "n/a" for UDP; "not
    measured" when there is neither."""
    if s.retransmits is not None:
        mark = GENERATOR_MARK if s.retransmits_metric == GENERATOR_RETRANSMITS else ""
        return f"{s.retransmits.median:,.0f}{mark}"
    return "n/a" if s.config.traffic.protocol is Protocol.UDP else NOT_MEASURED


def generators_counting(summaries: list[ConfigSummary]) -> list[str]:
    """The generators whose own retransmit count rows show (marked)."""
    return sorted(
        {
            s.config.traffic.generator.value
            for s in summaries
            if s.retransmits is not None and s.retransmits_metric == GENERATOR_RETRANSMITS
        }
    )


def retransmits_note(summaries: list[ConfigSummary], *, marked_as: str | None = None) -> str:
    """Where the retransmit figures shown come from, in a sentence or two; ``marked_as``:
    how the generator's counts are told apart, if not by :data:`GENERATOR_MARK`."""
    shown = [s for s in summaries if s.goodput is not None]
    sources = {s.retransmits_metric for s in shown if s.retransmits is not None}
    notes = []
    if KERNEL_RETRANSMITS in sources:
        notes.append(
            "Retransmits are the kernel's count: RetransSegs of the client's and the"
            " server's namespaces together over the measured window"
            f" ({KERNEL_RETRANSMITS}), the median per run."
        )
    marked = generators_counting(shown)
    if marked:
        notes.append(
            f"{marked_as or f'Retransmits marked {GENERATOR_MARK}'}: {', '.join(marked)}'s"
            " own count over its"
            " measured window (recorded before the kernel's window counters; those runs'"
            " kernel counters span the whole trial, set-up and warm-up included:"
            " tcp.ROLE.retrans_segs)."
        )
    silent = sorted(
        {s.config.traffic.generator.value for s in shown if retransmits_cell(s) == NOT_MEASURED}
    )
    if silent:
        notes.append(
            f"Retransmits {NOT_MEASURED}: the load generator ({', '.join(silent)}) does not"
            " report them (iperf2 2.1.8's CSV has no retry count) and the run was recorded"
            " before the kernel's window counters; the namespaces' own TCP counters over"
            " the whole trial are in every trial's metrics (tcp.ROLE.retrans_segs)."
        )
    return " ".join(notes)


def table_axes(summaries: list[ConfigSummary]) -> list[str]:
    """The varying settings a table shows as columns; the kind and the implementation
    are in the row's label already."""
    skip = ("tunnel.kind", "tunnel.implementation")
    return [a for a in varying_axes(summaries) if a in AXIS_HEADINGS and a not in skip]


def rtt_cell(latency: Latency | None) -> str:
    """``0.05→4.2``: the idle round trip and the loaded 95th percentile, in ms."""
    if latency is None or latency.loaded_p95_ms is None:
        return "-" if latency is None else f"{ms(latency.idle_ms)}→-"
    return f"{ms(latency.idle_ms)}→{ms(latency.loaded_p95_ms)}"


def rtt_cells(latency: Latency | None) -> list[str]:
    """The cells of :data:`RTT_COLUMNS`: idle, loaded median/p95, and the increase."""
    if latency is None:
        return ["-", "-", "-"]
    loaded = "-"
    if latency.loaded_ms is not None:
        p95 = "-" if latency.loaded_p95_ms is None else ms(latency.loaded_p95_ms)
        loaded = f"{ms(latency.loaded_ms)} / {p95}"
    return [ms(latency.idle_ms), loaded, increase_cell(latency.increase_ms)]


#: Loaded minus idle closer to 0 than this is shown as "≈0", not as a signed figure: it is
#: ping's own spread on a path of a few hops (a veth path's idle and loaded medians move
#: by 0.01-0.03 ms between runs with no load at all).
SAME_RTT_MS = 0.05


def increase_cell(increase: float | None) -> str:
    """``+14.9``; ``≈0`` within :data:`SAME_RTT_MS`, where a sign would be noise."""
    if increase is None:
        return "-"
    if abs(increase) < SAME_RTT_MS:
        return "≈0"
    return f"{'+' if increase >= 0 else '-'}{ms(abs(increase))}"


def median_with_ci(g: Summary) -> str:
    """``2,366 (2,344-2,388)``: the median and its bootstrap 95% interval, in Mbit/s."""
    if g.ci is None:
        return f"{mbit(g.median):,.0f}"
    return f"{mbit(g.median):,.0f} ({mbit(g.ci[0]):,.0f}-{mbit(g.ci[1]):,.0f})"


#: Marks a share of the ceiling above 100% that is within the tool's bound for it.
ABOVE_MARK = "†"


def _within_lead(s: ConfigSummary) -> bool:
    """Whether the configuration's share of the ceiling reads above 100.0% while within
    what the shaper can send ahead of its rate (the ``above-ceiling`` verdict names the
    figures beyond it)."""
    pct = s.pct_of_ceiling
    if pct is None or round(pct, 1) <= 100.0:
        return False
    verdict = s.diagnosis.verdict.bound if s.diagnosis else None
    return verdict is not Bound.ABOVE_CEILING and pct <= above_ceiling_pct(s.config)


def ceiling_cell(s: ConfigSummary) -> str:
    """``99.8%``; ``102.7%†`` above 100% (:func:`ceiling_note` says why)."""
    if s.pct_of_ceiling is None:
        return "-"
    return f"{s.pct_of_ceiling:.1f}%{ABOVE_MARK if _within_lead(s) else ''}"


def ceiling_note(summaries: list[ConfigSummary]) -> str:
    """The footnote to :data:`ABOVE_MARK`, or "" when no figure carries it."""
    marked = [s for s in summaries if _within_lead(s)]
    if not marked:
        return ""
    lead = max(above_ceiling_pct(s.config) for s in marked) - ABOVE_CEILING_PCT
    return (
        f"{ABOVE_MARK} above 100% of the ceiling within what the measurement allows: up to"
        f" {lead:.2g}% for the shaper's burst lead (its bucket, with htb one aggregate more,"
        " sent ahead of its rate as the measured window opens) and"
        f" {ABOVE_CEILING_PCT - 100:g}% by which the counters and the model may differ;"
        " not more than the link carries"
    )


def rows(
    summaries: list[ConfigSummary], *, detailed: bool = False
) -> tuple[list[str], list[list[str]]]:
    """The header and one row per configuration; ``detailed`` (the HTML report) spells
    the round trips out in :data:`RTT_COLUMNS`, the terminal has :data:`RTT_COLUMN`."""
    axes = table_axes(summaries)
    header = ["tunnel", *(AXIS_HEADINGS[a] for a in axes)]
    header += ["median Mbit/s (95% CI)", "consistency"]  # the statistics of the runs
    header.append("retrans")
    # A run that measured no baseline (a tuning session of a tunnel) has no such column.
    baselines = any(s.pct_of_baseline is not None for s in summaries)
    if baselines:
        header.append("% base")
    ceilings = any(s.ceiling is not None for s in summaries)
    if ceilings:
        header.append("% ceil")
    latency = any(s.latency is not None for s in summaries)
    if latency:
        header += list(RTT_COLUMNS) if detailed else [RTT_COLUMN]
    header += ["busiest core u/s/si", "limited by"]
    body = []
    for s in summaries:
        row = [s.label, *(axis_value(s, a) for a in axes)]
        if s.skipped is not None or s.goodput is None:
            row += ["skipped" if s.skipped is not None else "failed"]
            row += ["-"] * (len(header) - len(row))
        else:
            g = s.goodput
            row += [median_with_ci(g), consistency(g)]
            row.append(retransmits_cell(s))
            if baselines:
                row.append("-" if s.pct_of_baseline is None else f"{s.pct_of_baseline:.0f}%")
            if ceilings:
                row.append(ceiling_cell(s))
            if latency:
                row += rtt_cells(s.latency) if detailed else [rtt_cell(s.latency)]
            c = s.busiest_core
            row.append(
                f"cpu{c.core} {c.busy:.0f}% ({c.user:.0f}/{c.system:.0f}/{c.softirq:.0f})"
                if c
                else "n/a"
            )
            row.append(limited_by(s.diagnosis.verdict) if s.diagnosis else "-")
        if s.failed:
            row[0] += f" [{len(s.failed)}/{len(s.trials)} failed]"
        body.append(row)
    return header, body


#: What the terminal leaves out first when the table, its cells folded, is still wider
#: than the terminal: the reports (Markdown, HTML, JSON) have every column. The loaded
#: round trip goes last: it is what the goodput cost, and nothing else in the row says it.
DROPPABLE = ("consistency", "retrans", "busiest core u/s/si", "% ceil", "% base", RTT_COLUMN)


def render(summaries: list[ConfigSummary], width: int | None = None) -> str:
    """The table; with ``width``, in at most that many characters a line, saying which
    columns it left out to get there."""
    header, body = rows(summaries)
    numeric = {i for i, h in enumerate(header) if h not in TEXT_COLUMNS}
    if width is None:
        lines, left_out = aligned(header, body, numeric), list[str]()
    else:
        lines, left_out = fitted(header, body, numeric, width, DROPPABLE, fold=True)
    if "retrans" not in left_out and any(
        row[header.index("retrans")].endswith(GENERATOR_MARK) for row in body
    ):
        lines.append(f"{GENERATOR_MARK} {generator_retransmits_legend(summaries)}")
    if "% ceil" not in left_out and (note := ceiling_note(summaries)):
        lines += wrap(note, width, hanging="  ") if width is not None else [note]
    if left_out and width is not None:
        note = f"(left out to fit {width} columns: {', '.join(left_out)})"
        lines += wrap(note, width, hanging=" ")
    return "\n".join(lines)


def generator_retransmits_legend(summaries: list[ConfigSummary]) -> str:
    """What a retransmit figure marked :data:`GENERATOR_MARK` is, in one line."""
    marked = generators_counting(summaries)
    return (
        f"retrans: {', '.join(marked) or 'the generator'}'s own count (recorded before"
        " kernel window counters)"
    )
