"""A run as Markdown, in the shape people post results: what was run and where, one table
row per configuration (median, spread, retransmits, % of baseline, busiest core), what was
skipped or failed and why, and the charts as PNG files beside the report.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from tunnelbench.analysis import noise
from tunnelbench.analysis.precision import repetitions_phrase
from tunnelbench.analysis.stats import consistency
from tunnelbench.analysis.summary import BusiestCore, ConfigSummary, varying_axes
from tunnelbench.bench.progress import format_duration
from tunnelbench.kinds import (
    Generator,
    Protection,
    Protocol,
    StreamMode,
    TunnelKind,
    TunnelMode,
    WanEncapsulation,
)
from tunnelbench.model import metrics as metric
from tunnelbench.model.environment import Environment
from tunnelbench.model.hostsrecord import RemoteRecord
from tunnelbench.model.plan import TrialConfig, varying_paths
from tunnelbench.model.records import TCG, Resolved, RunRecord, TrialRecord
from tunnelbench.model.tuning import TuneRecord
from tunnelbench.model.wan import format_pct, format_us
from tunnelbench.report import figures, files, findings, precision, software, timeline, tune
from tunnelbench.report.charts import Chart, charts_for_run
from tunnelbench.report.json_report import planned_trials
from tunnelbench.report.runs import trials_cell, utc
from tunnelbench.report.table import (
    AXIS_HEADINGS,
    RTT_COLUMNS,
    axis_value,
    ceiling_cell,
    ceiling_note,
    no_queue_limit,
    retransmits_cell,
    retransmits_note,
    rtt_cells,
)
from tunnelbench.report.view import RunView
from tunnelbench.units import mbit

STATUSES = ("ok", "failed", "skipped")
NUMERIC_HEADINGS = {
    "streams", "IP", "tun MTU", "LAN MTU", "WAN MTU", "limit", "WAN rate", "UDP rate",
    "CPU budget", "duration s", "warm-up s", "median Mbit/s", "95% CI Mbit/s", "min-max Mbit/s",
    "delay", "jitter", "loss", "reorder",
    "CV", "retransmits", "% of baseline", "% of ceiling", *RTT_COLUMNS,
}  # fmt: skip


@dataclass(frozen=True)
class ChartFile:
    """A chart and the link to its image, relative to the Markdown file."""

    chart: Chart
    link: str


def escape(text: str) -> str:
    """Text safe inside a table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], body: Sequence[Sequence[str]], numeric: set[int]) -> list[str]:
    """A pipe table, padded so that it also reads as plain text."""
    cells = [[escape(c) for c in row] for row in [header, *body]]
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        padded = (
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * (w - 1) + ":" if i in numeric else "-" * w for i, w in enumerate(widths)]
    return [line(cells[0]), line(rule), *(line(r) for r in cells[1:])]


def busiest(c: BusiestCore | None) -> str:
    if c is None:
        return "n/a"
    return f"cpu{c.core} {c.busy:.0f}% ({c.user:.0f}/{c.system:.0f}/{c.softirq:.0f})"


def _result_cells(s: ConfigSummary, ceilings: bool, latency: bool) -> list[str]:
    width = 9 + ceilings + (len(RTT_COLUMNS) if latency else 0)
    if s.skipped is not None:
        return ["skipped", *["-"] * (width - 1)]
    g = s.goodput
    if g is None:
        return ["failed", *["-"] * (width - 1)]
    c = s.busiest_core
    ceiling = [ceiling_cell(s)]
    return [
        f"{mbit(g.median):,.0f}",
        "-" if g.ci is None else f"{mbit(g.ci[0]):,.0f}-{mbit(g.ci[1]):,.0f}",
        f"{mbit(g.minimum):,.0f}-{mbit(g.maximum):,.0f}",
        "-" if g.cv is None else f"{100 * g.cv:.1f}%",
        consistency(g),
        retransmits_cell(s),
        "-" if s.pct_of_baseline is None else f"{s.pct_of_baseline:.0f}%",
        *(ceiling if ceilings else []),
        *(rtt_cells(s.latency) if latency else []),
        busiest(c),
        s.diagnosis.verdict.bound.value if s.diagnosis else "-",
    ]


def results_table(summaries: list[ConfigSummary]) -> list[str]:
    """One row per configuration; the settings that vary in this run as columns."""
    axes = [a for a in varying_axes(summaries) if a in AXIS_HEADINGS and a != "tunnel.kind"]
    header = ["tunnel", *(AXIS_HEADINGS[a] for a in axes)]
    header += ["median Mbit/s", "95% CI Mbit/s", "min-max Mbit/s", "CV", "consistency"]
    header += ["retransmits", "% of baseline"]
    ceilings = any(s.ceiling is not None for s in summaries)
    if ceilings:
        header.append("% of ceiling")
    latency = any(s.latency is not None for s in summaries)
    if latency:
        header += list(RTT_COLUMNS)
    header += ["busiest core (usr/sys/soft %)", "verdict"]
    body = []
    for s in summaries:
        label = s.label
        if s.failed and s.skipped is None:
            label += f" ({len(s.failed)} of {len(s.trials)} runs failed)"
        cells = _result_cells(s, ceilings, latency)
        body.append([label, *(axis_value(s, a) for a in axes), *cells])
    if ci_is_the_range(summaries):
        # With few runs the median's interval is the runs' whole range: one column says it.
        drop = header.index("min-max Mbit/s")
        header = [h for i, h in enumerate(header) if i != drop]
        body = [[c for i, c in enumerate(row) if i != drop] for row in body]
    numeric = {i for i, h in enumerate(header) if h in NUMERIC_HEADINGS}
    return table(header, body, numeric)


def ci_is_the_range(summaries: list[ConfigSummary]) -> bool:
    """Whether every measured configuration's 95% interval of the median is exactly the
    range of its runs (the bootstrap gives that up to 5 runs or so)."""
    measured = [s.goodput for s in summaries if s.goodput is not None]
    return bool(measured) and all(
        g.ci is not None and g.ci == (g.minimum, g.maximum) for g in measured
    )


def _setting_phrases(c: TrialConfig, resolved: Resolved) -> list[tuple[str, str]]:
    """(setting path, phrase) for what a configuration sets, in reading order; settings
    left at their default (the kernel's, the device's) are left out."""
    lab, tunnel, traffic = c.lab, c.tunnel, c.traffic
    out = [("lab.topology", f"{lab.topology.value} topology")]
    if traffic.protocol is Protocol.UDP:
        rate = f" at {mbit(traffic.udp_rate):g} Mbit/s per stream" if traffic.udp_rate else ""
        out.append(("traffic.protocol", f"UDP{rate}"))
    else:
        out.append(("traffic.protocol", "TCP"))
    streams = f"{traffic.streams} stream{'s' if traffic.streams > 1 else ''}"
    out.append(("traffic.streams", streams))
    mode = resolved.traffic.stream_mode or traffic.stream_mode
    if traffic.streams > 1:
        each = (
            "one iperf3 process per stream"
            if mode is StreamMode.PROCESSES
            else "one iperf3 process"
        )
        out.append(("traffic.stream_mode", each))
    out.append(("traffic.direction", traffic.direction.value))
    out.append(("traffic.family", f"IPv{traffic.family}"))
    if traffic.congestion:
        out.append(("traffic.congestion", f"congestion control {traffic.congestion}"))
    out.append(("lab.wan.mtu", f"WAN MTU {lab.wan.mtu}"))
    out.append(("lab.lan_mtu", f"LAN MTU {lab.lan_mtu}"))
    if lab.wan.rate is not None:
        queue = lab.wan.queue.value if lab.wan.queue else "pfifo"
        out.append(("lab.wan.rate", f"WAN shaped to {mbit(lab.wan.rate):g} Mbit/s"))
        out.append(("lab.wan.shaper", f"shaper {lab.wan.shaper.value}"))
        out.append(("lab.wan.queue", f"queue {queue}"))
    elif lab.wan.queue is not None:
        out.append(("lab.wan.queue", f"WAN queue {lab.wan.queue.value}"))
    if not no_queue_limit(lab.wan):
        out.append(("lab.wan.queue_limit", f"queue limit {lab.wan.queue_limit} packets"))
    if lab.wan.delay:
        out.append(("lab.wan.delay", f"WAN delay {format_us(lab.wan.delay)} each way"))
    if lab.wan.jitter:
        out.append(("lab.wan.jitter", f"jitter {format_us(lab.wan.jitter)}"))
    if lab.wan.loss:
        out.append(("lab.wan.loss", f"WAN loss {format_pct(lab.wan.loss)}"))
    if lab.wan.reorder:
        out.append(("lab.wan.reorder", f"WAN reordering {format_pct(lab.wan.reorder)}"))
    for name, value in lab.offloads.changes().items():
        roles = ",".join(lab.offloads.roles) or "all roles"
        out.append((f"lab.offloads.{name}", f"{name.upper()} {'on' if value else 'off'} ({roles})"))
    if lab.rps_cpus:
        out.append(("lab.rps_cpus", f"RPS CPUs {lab.rps_cpus}"))
    if lab.wan.encapsulation is WanEncapsulation.PPPOE:
        out.append(("lab.wan.encapsulation", "WAN over PPPoE"))
    if lab.queues is not None:
        out.append(("lab.queues", f"{lab.queues} queue{'s' if lab.queues > 1 else ''} per link"))
    for role, budget in lab.budget.given().items():
        out.append((f"lab.budget.{role}", f"{role} at {budget:.0%} of a core"))
    if tunnel.kind is not TunnelKind.NONE:
        if tunnel.implementation is not None:
            out.append(("tunnel.implementation", f"implementation {tunnel.implementation}"))
        if tunnel.mtu is not None:
            out.append(("tunnel.mtu", f"tunnel MTU {tunnel.mtu}"))
        if tunnel.cpu_budget is not None:
            out.append(("tunnel.cpu_budget", f"tunnel CPU budget {tunnel.cpu_budget:.0%}"))
        if cipher := resolved.setup.cipher:
            out.append(("tunnel.cipher", f"cipher {cipher}"))
        if tunnel.protection is not Protection.NONE:
            out.append(("tunnel.protection", f"protected by {tunnel.protection.value}"))
            out.append(("tunnel.esp_mode", f"ESP {tunnel.esp_mode.value} mode"))
    out.append(("traffic.duration", f"{traffic.duration} s measured"))
    if traffic.warmup is None:
        out.append(
            (
                "traffic.warmup",
                f"warm-up until steady state (at most {traffic.warmup_max} s), excluded",
            )
        )
    else:
        out.append(("traffic.warmup", f"{traffic.warmup} s of warm-up excluded"))
    return out


def common_settings(summaries: list[ConfigSummary]) -> str:
    """What every configuration shares, in words (``site-to-site topology, TCP, ...``).

    Settings that vary are the table's columns; tunnel settings only count among the
    configurations with a tunnel, as a baseline has none.
    """
    if not summaries:
        return ""
    varying = set(varying_axes(summaries))
    tunnels = [s for s in summaries if s.config.tunnel.kind is not TunnelKind.NONE]
    varying |= {p for p in varying_paths(s.config for s in tunnels) if p.startswith("tunnel.")}
    first = tunnels[0] if tunnels else summaries[0]
    phrases = _setting_phrases(first.config, first.resolved)
    return ", ".join(text for path, text in phrases if path not in varying)


def header_lines(
    run: RunRecord, trials: list[TrialRecord], summaries: list[ConfigSummary]
) -> list[str]:
    experiment = run.experiment
    title = experiment.name or "benchmark"
    when = utc(run.started_at)
    if run.ended_at is not None:
        when += f", took {format_duration(run.ended_at - run.started_at)}"
    order = experiment.order.value
    if experiment.seed is not None:
        order += f" (seed {experiment.seed})"
    env = run.environment
    governor = env.cpu_governor or "not exposed"
    counts = {status: sum(1 for t in trials if t.status == status) for status in STATUSES}
    design = f"{repetitions_phrase(experiment)} of each configuration, {order} order"
    planned = planned_trials(experiment)
    if (record := tune.record_of(run)) is not None:
        design, planned = tune.design(record), len(trials)  # a session plans no trials
    named = [f"- **Label:** {escape(run.label)}"] if run.label else []
    if run.notes:
        named.append(f"- **Notes:** {escape(' '.join(run.notes.split()))}")
    return [
        f"# {escape(title)}: tunnelbench run {run.id}",
        "",
        *named,
        f"- **Run:** {run.id}, {run.status}; {when}; trials: {trials_cell(counts, planned)}",
        f"- **Command:** `{run.command_line}`",
        f"- **Experiment:** {design}",
        f"- **Common settings:** {common_settings(summaries) or 'none'}",
        *(
            [f"- **Hosts:** {hosts_line(env.remote)}"]
            if env.remote
            else [
                f"- **Machine:** {_known(env.cpu_model)}, {_known(env.cores)} cores; "
                f"kernel {_known(env.kernel)}; CPU frequency governor: {governor}"
            ]
        ),
        *[f"- **VM guest:** {guest_line(spec, facts)}" for spec, facts in guests(env).items()],
        f"- **Software:** {software.line(run, trials) or 'not recorded'}",
        *[f"- **Warning:** {escape(w)}" for w in software.mismatched_ends(trials)],
    ]


#: Who made a hosts run's tunnel, as the header says it.
TUNNEL_MADE = {
    TunnelMode.BUILD: "built by tunnelbench",
    TunnelMode.EXISTING: "the user's, already up",
    TunnelMode.NONE: "none",
}


def hosts_line(remote: RemoteRecord) -> str:
    """A run on real hosts: each role's SSH destination, kernel and cores (a router
    without a login: a black box, and its SNMP agent), which is the DUT, and who built
    the tunnel (the lab's settings in the line above do not apply)."""
    hosts = remote.hosts
    parts = []
    for role, where in hosts.hosts.items():
        dut = " = DUT" if role == hosts.dut else ""
        if where.ssh is None:  # a router without a login
            snmp = where.snmp
            seen = f"its SNMP agent `{escape(snmp)}`" if snmp else "no SNMP agent"
            parts.append(f"{role}{dut} (a black box, no login: {seen})")
            continue
        f = remote.facts.get(role)
        tools = ", busybox" if f is not None and f.busybox else ""
        kernel, cores = (f.kernel, f.cores) if f is not None else ("?", "?")
        parts.append(f"{role}{dut} (`{escape(where.ssh)}`: kernel {kernel}, {cores} cores{tools})")
    tunnel = TUNNEL_MADE[hosts.tunnel_mode]
    return f"{'; '.join(parts)}; tunnel: {tunnel} (the lab settings do not apply to real hosts)"


def guests(env: Environment) -> dict[str, Environment]:
    """The VM guests the run's trials on other kernels ran in, by ``lab.kernel``."""
    return env.guests or {}


def _known(value: object) -> str:
    """A recorded fact as the header shows it; ``?`` where it was not recorded."""
    return "?" if value is None else str(value)


def guest_line(spec: str, facts: Environment) -> str:
    """``lab.kernel = debian``: the guest's kernel, how its CPU ran and its size."""
    mode = _known(facts.virtualization)
    line = (
        f"lab.kernel {spec}: kernel {_known(facts.kernel)}"
        f" ({facts.kernel_package or 'unpacked'}), {mode}, {_known(facts.vm_cpus)}"
        f" vCPUs, {_known(facts.vm_memory_mib)} MiB"
    )
    if mode == TCG:
        line += "; QEMU emulates its CPU: CPU-bound figures measure the emulator"
    return line


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _latency_note(summaries: list[ConfigSummary]) -> str:
    if not any(s.latency is not None for s in summaries):
        return ""
    return (
        " Idle RTT is the median round trip of pings from the client to the server before"
        " the traffic; loaded RTT the median and 95th percentile of pings every 100 ms over"
        " the measured window, while the traffic ran; the increase is what the load added to"
        " the median (each a median over the runs)."
    )


def explanation(summaries: list[ConfigSummary]) -> str:
    counts = sorted({s.goodput.n for s in summaries if s.goodput})
    if not counts:
        return "Nothing was measured."
    runs = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    ceiling = (
        " % of ceiling divides by the modelled upper bound on TCP goodput through the shaped"
        " WAN link (docs/ceilings.md)." + (f" {note}." if (note := ceiling_note(summaries)) else "")
        if any(s.ceiling is not None for s in summaries)
        else ""
    )
    sources = ["iperf3: the receiving end's interval reports in the measured window"]
    measured = [
        metric.GOODPUT_WINDOW.name in t.metrics
        for s in summaries
        if s.config.traffic.generator is Generator.IPERF3
        for t in s.trials
        if metric.GOODPUT.name in t.metrics
    ]
    if not all(measured):
        # Stored before goodput was counted from the intervals: say what those figures are.
        old = "iperf3's end summary `end.sum_received`"
        sources = [f"{sources[0]}; before it, {old}" if any(measured) else old]
    if any(s.config.traffic.generator is Generator.IPERF2 for s in summaries):
        sources.append("iperf2: the receiving end's 1 s interval reports after the warm-up")
        if all(s.config.traffic.generator is Generator.IPERF2 for s in summaries):
            sources = sources[1:]
    note = retransmits_note(summaries)
    range_note = (
        " (with these few runs, the range of the runs: min-max)"
        if ci_is_the_range(summaries)
        else ""
    )
    return (
        f"Median of {runs} runs per configuration. Goodput is what the receiver counted "
        f"({'; '.join(sources)}), warm-up excluded; 95% CI is the bootstrap interval "
        f"of the median{range_note}; CV is the coefficient of variation of the runs, and "
        "consistency says it in words (very consistent < 1%, consistent < 5%, variable < 10%, else "
        "inconsistent; see docs/statistics.md); retransmits are the median per run. "
        "% of baseline divides a tunnel's median by the median of the same traffic over no "
        "tunnel in this run. The busiest core is the one with the least idle time over the "
        f"measured window, split into user / system / softirq %.{ceiling}{_latency_note(summaries)}"
        " The verdict is"
        " what limited the configuration, with its evidence under Diagnosis"
        f" (docs/diagnosis.md).{' ' + note if note else ''}"
    )


def not_measured(summaries: list[ConfigSummary]) -> list[str]:
    """Why configurations were skipped and which trials failed."""
    out: list[str] = []
    reasons: dict[str, list[ConfigSummary]] = {}
    for s in summaries:
        if s.skipped is not None:
            reasons.setdefault(s.skipped, []).append(s)
    if reasons:
        out += ["", "Skipped on this machine:", ""]
        for reason, group in reasons.items():
            trials = sum(len(s.trials) for s in group)
            out.append(f"- {plural(len(group), 'configuration')} ({trials} trials): {reason}")
    failed = [(s, t) for s in summaries for t in s.failed]
    if failed:
        out += ["", "Failed trials:", ""]
        out += [f"- trial {t.seq} ({s.label}, run {t.repetition}): {t.error}" for s, t in failed]
    return out


def noise_lines(found: noise.Noise) -> list[str]:
    """The run's noise floor and its disturbed trials, when it has either."""
    if not (said := found.lines()):
        return []
    return ["", "## This machine's noise", "", *(f"- {escape(line)}" for line in said)]


def diagnosis_lines(summaries: list[ConfigSummary]) -> list[str]:
    """The verdict of each configuration with its evidence, then the advice."""
    out = []
    if verdicts := findings.findings(summaries):
        out += ["", "## Diagnosis", "", *(f"- {escape(line)}" for line in verdicts)]
    if suggestions := findings.advice(summaries):
        out += ["", "## Advice", "", *(f"- {escape(line)}" for line in suggestions)]
    return out


def tuning_lines(record: TuneRecord) -> list[str]:
    """A tuning session's path: each step's start, diagnosis and verdicts, then the final
    configuration as a plan."""
    out = ["", "## Tuning path", "", escape(tune.headline(record)), ""]
    for step in tune.step_lines(record):
        out.append(f"- **{escape(step[0])}**")
        out += [f"  - {escape(line)}" for line in step[1:]]
    plan = tune.final_plan(record).rstrip("\n")
    return out + ["", "Final configuration, as a plan:", "", "```toml", plan, "```"]


def chart_lines(charts: Sequence[ChartFile]) -> list[str]:
    out = ["", "## Charts"]
    for item in charts:
        c = item.chart
        out += ["", f"### {c.title}", "", f"![{escape(c.title)}]({quote(item.link)})"]
        if c.note:
            out += ["", c.note]
    return out


def document(view: RunView, charts: Sequence[ChartFile] = ()) -> str:
    """The Markdown text; ``charts`` are linked at the end."""
    run, trials, summaries = view.run, view.trials, view.summaries
    lines = header_lines(run, trials, summaries)
    lines += ["", "## Results", "", *results_table(summaries), "", explanation(summaries)]
    if precise := precision.lines(run, trials):
        lines += ["", *(f"- {line.strip()}" if line.startswith(" ") else line for line in precise)]
    lines += not_measured(summaries)
    lines += noise_lines(view.noise)
    if (record := tune.record_of(run)) is not None:
        lines += tuning_lines(record)  # each step's diagnosis included
    else:
        lines += diagnosis_lines(summaries)
    if charts:
        lines += chart_lines(charts)
    return "\n".join(lines) + "\n"


def render(view: RunView) -> str:
    """The report without charts (for standard output)."""
    return document(view)


def charts_dir(path: Path) -> Path:
    """Where the PNG charts of the Markdown report at ``path`` go."""
    return path.with_name(f"{path.stem}-charts")


def charts(view: RunView) -> list[Chart]:
    return charts_for_run(view.summaries, view.artifact)


def write(view: RunView, path: Path) -> list[Path]:
    """Write the report to ``path`` and its charts as PNG files into ``charts_dir(path)``;
    return the paths written, the report first."""
    directory = charts_dir(path)
    drawn = figures.write_charts(charts(view), directory)
    linked = [ChartFile(c, f"{directory.name}/{f.name}") for c, f in drawn]
    found = timeline.timelines(view.summaries, view.artifact)
    seconds = figures.write_timelines(found, directory)
    text = document(view, linked)
    if seconds:
        text += "\n".join(timeline_lines(found, [f"{directory.name}/{f.name}" for f in seconds]))
        text += "\n"
    files.replace(path, text)  # last, and whole: it links only charts written
    return [path, *(f for _, f in drawn), *seconds]


def timeline_lines(found: Sequence[timeline.Timeline], links: Sequence[str]) -> list[str]:
    """The "Over the window" section: a picture per configuration, or one of small
    multiples."""
    out = ["", "## Over the window", ""]
    out.append(
        "The median run of each configuration over its measured window, at the rate the"
        " instruments sample: the receivers' goodput (every 0.1 s where they reported so),"
        " each ping's round trip, and the busiest cores' user, system and softirq shares"
        " (small multiples of goodput, round trip and the busiest core's share for many"
        " configurations)."
    )
    if len(links) == 1 and len(found) > 1:
        return [*out, "", f"![over the window]({quote(links[0])})"]
    for t, link in zip(found, links, strict=True):
        out += [
            "",
            f"### {escape(t.title)}",
            "",
            f"![{escape(t.title)}]({quote(link)})",
            "",
            t.note,
        ]
    return out
