"""Two sets of configurations side by side: is B faster than A, by how much, for sure?

The one implementation behind ``tunnelbench compare A B`` and its alias ``tunnelbench
report --compare A B``. A side is a run (``RUN``, ``latest``, ``DATABASE``,
``DATABASE:RUN``), optionally narrowed to some of its configurations by a selector
(``RUNREF@traffic.streams=4``; see :mod:`.selector`).

Configurations are paired when their settings are equal, ignoring the paths either
selector names (``7@traffic.streams=1`` against ``7@traffic.streams=4`` pairs each
1-stream configuration with the same configuration at 4 streams), and ignoring the tunnel
settings when one side holds only no-tunnel baselines (which have none). A configuration
without a partner is listed as such. For each pair the goodput of B's runs is compared
with A's (:mod:`tunnelbench.analysis.significance`): the ratio of medians with its 95%
interval, the rank test's p-value, and a plain verdict; so are the loaded round trips
(each run's 95th percentile under load), with a verdict of their own: a change that
buys goodput with latency says both. What differs between the two runs' environments
(kernel, versions) is listed above the table.
"""

import json
import statistics
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from tunnelbench.analysis import noise, significance
from tunnelbench.analysis.summary import ConfigSummary, varying_axes
from tunnelbench.bench.store import Store
from tunnelbench.echo import capped, did_you_mean, shown
from tunnelbench.errors import UserError
from tunnelbench.model.plan import ROLES, Experiment, flatten
from tunnelbench.model.records import NO_VM, TCG, RunRecord
from tunnelbench.report import view
from tunnelbench.report.fit import aligned, fitted, wrap, wrapped
from tunnelbench.report.markdown import escape
from tunnelbench.report.markdown import table as markdown_table
from tunnelbench.report.runs import utc
from tunnelbench.report.selector import Selector
from tunnelbench.report.table import (
    AXIS_HEADINGS,
    axis_value,
    retransmits_cell,
    retransmits_note,
)
from tunnelbench.units import mbit

FORMATS = ("table", "md", "json", "html")
#: A longer round trip by less than this fails no gate, whatever its share: a veth
#: path's 0.04 -> 0.07 ms is +66% at p = 0.048, and no user waits for it.
LATENCY_FLOOR_MS = 0.1
JSON_FORMAT_VERSION = 1
NUMERIC = {"A Mbit/s", "B Mbit/s", "B/A", "95% CI", "p", "A retrans", "B retrans"}
NUMERIC |= {"A p95 ms", "B p95 ms"}
NUMERIC |= {AXIS_HEADINGS[a] for a in ("traffic.streams", "traffic.family", "tunnel.mtu")}
NUMERIC |= {AXIS_HEADINGS[a] for a in ("lab.lan_mtu", "lab.wan.mtu", "lab.wan.queue_limit")}
NUMERIC |= {AXIS_HEADINGS[a] for a in ("lab.wan.rate", "traffic.udp_rate", "tunnel.cpu_budget")}
NUMERIC |= {AXIS_HEADINGS[f"lab.wan.{a}"] for a in ("delay", "jitter", "loss", "reorder")}
NUMERIC |= {AXIS_HEADINGS["lab.queues"]} | {AXIS_HEADINGS[f"lab.budget.{r}"] for r in ROLES}


def _is_file(text: str) -> bool:
    """Whether ``text`` names a file; a name too long to look up names none."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


@dataclass(frozen=True)
class RunRef:
    """A run named on the command line: ``RUN`` or ``latest`` in the ``--db`` database,
    ``DATABASE`` (its latest run) or ``DATABASE:RUN``."""

    db: Path
    run: str

    @classmethod
    def parse(cls, text: str, default_db: Path, where: str = "--compare") -> "RunRef":
        def is_run(ref: str) -> bool:
            return (ref.isascii() and ref.isdigit()) or ref == "latest"

        if is_run(text):
            return cls(default_db, text)
        head, sep, tail = text.rpartition(":")
        if sep and is_run(tail) and _is_file(head):
            return cls(Path(head), tail)
        if _is_file(text):
            return cls(Path(text), "latest")
        raise UserError(
            f"{where}: {capped(repr(text), 300)} is not a run id, 'latest', a results database"
            " or DATABASE:RUN"
        )


@dataclass(frozen=True)
class SideRef:
    """One side as written: a run and, after ``@``, an optional selector."""

    run: RunRef
    selector: Selector | None

    @classmethod
    def parse(cls, text: str, default_db: Path, where: str = "--compare") -> "SideRef":
        head, at, tail = text.rpartition("@")
        if at and "=" in tail:  # a database path may itself hold an '@'
            return cls(RunRef.parse(head, default_db, where), Selector.parse(tail, where))
        return cls(RunRef.parse(text, default_db, where), None)


@dataclass(frozen=True)
class Side:
    db: Path
    run: RunRecord
    summaries: list[ConfigSummary]  # the selected configurations
    selector: Selector | None = None

    @property
    def name(self) -> str:
        label = f" «{self.run.label}»" if self.run.label else ""
        return f"run {self.run.id}{label}" + (f" @ {self.selector}" if self.selector else "")

    def describe(self) -> str:
        name = Experiment.from_dict(self.run.experiment).name or "benchmark"
        when = utc(self.run.started_at)
        where = f" where {self.selector}" if self.selector else ""
        label = f" «{self.run.label}»" if self.run.label else ""
        status = f"({name}, {when}, {self.run.status})"
        return f"run {self.run.id}{label} in {self.db} {status}{where}"

    @property
    def only_baselines(self) -> bool:
        return all(s.config.tunnel.kind.value == "none" for s in self.summaries)


@dataclass(frozen=True)
class Row:
    a: ConfigSummary | None
    b: ConfigSummary | None

    @property
    def summary(self) -> ConfigSummary:
        return self.a or self.b  # type: ignore[return-value]

    @cached_property
    def stats(self) -> significance.Comparison | None:
        """B's goodput runs against A's; None unless both sides measured something."""
        if self.a is None or self.b is None or not self.a.goodput or not self.b.goodput:
            return None
        return significance.compare(self.a.goodput.values, self.b.goodput.values)

    @cached_property
    def latency_stats(self) -> significance.Comparison | None:
        """B's loaded round trips (each run's 95th percentile) against A's; None unless
        both sides recorded them."""
        runs = [p95_runs(s) for s in (self.a, self.b)]
        if not runs[0] or not runs[1]:
            return None
        return significance.compare(runs[0], runs[1])

    @property
    def latency_change_pct(self) -> float | None:
        """(B - A) / A of the median loaded p95, in percent: above 0, B waits longer."""
        stats = self.latency_stats
        return None if stats is None or stats.ratio is None else 100.0 * (stats.ratio - 1)

    @property
    def change_pct(self) -> float | None:
        """(B - A) / A of the medians, in percent."""
        stats = self.stats
        return None if stats is None or stats.ratio is None else 100.0 * (stats.ratio - 1)

    @property
    def noise_pct(self) -> float | None:
        """This machine's noise for the pair: the larger of the two runs' CVs of the
        configuration's baseline."""
        found = [s.noise_pct for s in (self.a, self.b) if s is not None and s.noise_pct]
        return max(found, default=None)

    @property
    def in_noise(self) -> bool:
        """Not shown significant, and the medians differ by less than the noise."""
        stats, change = self.stats, self.change_pct
        return (
            stats is not None
            and not stats.significant
            and change is not None
            and noise.within(change, self.noise_pct)
        )

    @property
    def verdict(self) -> str:
        """The comparison's sentence, and whether the difference is within the noise."""
        if self.stats is None:
            return short_verdict(self)
        if not self.in_noise:
            return self.stats.verdict
        return (
            f"{self.stats.verdict}; the {self.change_pct:+.1f}% between the medians is"
            f" smaller than this machine's noise (CV {self.noise_pct:.1f}% of the baseline)"
        )


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    rows: list[Row]
    environment_changes: list[tuple[str, object, object]]  # (key, in A, in B)

    def fixed_paths(self) -> set[str]:
        """Setting paths that have one value on each side (the selectors say which):
        not repeated as columns."""
        fixed = set()
        for side in (self.a, self.b):
            if side.selector is None:
                continue
            for path in side.selector.paths:
                other = self.b if side is self.a else self.a
                values = {json.dumps(axis_values(s, path)) for s in other.summaries}
                if len(values) <= 1:
                    fixed.add(path)
        return fixed


def axis_values(s: ConfigSummary, path: str) -> Any:
    return flatten(s.config.to_dict()).get(path)


def p95_runs(s: ConfigSummary | None) -> tuple[float, ...]:
    """Each successful run's loaded 95th-percentile round trip, in ms; empty when the
    runs recorded none."""
    latency = None if s is None else s.latency
    return () if latency is None else latency.p95_runs


def latency_verdict(stats: significance.Comparison) -> str:
    """The loaded round trip's sentence: ``B's loaded RTT p95 is higher by 87.8% (95% CI
    +18.1%..+156.3%, p = 0.0079)``; higher is worse."""
    if stats.direction in ("undecidable", "none") or stats.ratio is None:
        return stats.verdict
    change = stats.ratio - 1
    ci = ""
    if stats.ratio_ci is not None:
        low, high = (end - 1 for end in stats.ratio_ci)
        ci = f"95% CI {low:+.1%}..{high:+.1%}, "
    way = "higher" if change > 0 else "lower"
    return (
        f"B's loaded RTT p95 is {way} by {abs(change):.1%} ({ci}{significance.format_p(stats.p)})"
    )


def short_latency_verdict(row: "Row") -> str:
    stats = row.latency_stats
    if stats is None:
        return "-"
    if stats.direction == "undecidable":
        return f"too few runs ({stats.n1} vs {stats.n2})"
    if stats.direction == "none" or stats.ratio is None:
        return "no significant difference"
    way = "higher" if stats.ratio > 1 else "lower"
    return f"B {way} by {abs(stats.ratio - 1):.0%}"


def load(ref: RunRef, selector: Selector | None = None, where: str = "--compare") -> Side:
    store = Store.read(ref.db)
    try:
        loaded = view.load(store, ref.run)
    finally:
        store.close()
    run, summaries = loaded.run, loaded.summaries
    if selector is not None:
        summaries = selector.select(summaries, where, f"run {run.id} in {ref.db}")
    return Side(ref.db, run, summaries, selector)


def _pairing_key(s: ConfigSummary, ignored: frozenset[str], ignore_tunnel: bool) -> str:
    flat = flatten(s.config.to_dict())
    kept = {
        path: value
        for path, value in flat.items()
        if path not in ignored and not (ignore_tunnel and path.startswith("tunnel."))
    }
    return json.dumps(kept, sort_keys=True, default=str)


def compare(a: Side, b: Side) -> Comparison:
    """Pair A's configurations with B's; see the module docstring for the rule."""
    ignored = (a.selector.paths if a.selector else frozenset()) | (
        b.selector.paths if b.selector else frozenset()
    )
    # A baseline has no tunnel settings: a baseline side pairs with any tunnel.
    ignore_tunnel = bool(ignored) and a.only_baselines != b.only_baselines
    b_keys = [_pairing_key(s, ignored, ignore_tunnel) for s in b.summaries]
    rows: list[Row] = []
    paired: set[int] = set()
    for s in a.summaries:
        key = _pairing_key(s, ignored, ignore_tunnel)
        partners = [i for i, k in enumerate(b_keys) if k == key]
        rows += [Row(s, b.summaries[i]) for i in partners] or [Row(s, None)]
        paired.update(partners)
    rows += [Row(None, s) for i, s in enumerate(b.summaries) if i not in paired]
    for row in rows:
        _refuse_emulated(row)
    env_a, env_b = flatten(a.run.environment), flatten(b.run.environment)
    changes = [
        (key, env_a.get(key), env_b.get(key))
        for key in dict.fromkeys([*env_a, *env_b])
        if env_a.get(key) != env_b.get(key)
    ]
    return Comparison(a, b, rows, changes)


def _emulation(s: ConfigSummary) -> str:
    """How the configuration's CPU ran: ``tcg`` (emulated), ``kvm`` or ``none`` (this
    machine's kernel; also every run recorded before labs ran in guests)."""
    return s.resolved.virtualization or NO_VM


def _refuse_emulated(row: Row) -> None:
    """An emulated CPU's figure against a real CPU's is not a comparison of settings:
    QEMU's emulation of the CPU sets one side's CPU-bound figures."""
    if row.a is None or row.b is None:
        return
    modes = (_emulation(row.a), _emulation(row.b))
    if (TCG in modes) and modes[0] != modes[1]:
        raise UserError(
            f"compare: {row.a.label} ran with virtualization {modes[0]} in A and {modes[1]}"
            " in B; a guest whose CPU QEMU emulates (tcg) measures the emulator, so its"
            " figures compare only with other tcg figures (select them with lab.kernel)"
        )


# --- cells ---


def _median(s: ConfigSummary | None) -> str:
    if s is None:
        return "-"
    if s.skipped is not None:
        return "skipped"
    return f"{mbit(s.goodput.median):,.0f}" if s.goodput else "failed"


def _p95(s: ConfigSummary | None) -> str:
    """The median over the runs of each run's loaded p95: two decimals below 1 ms (a
    veth lab's round trips are tens of microseconds), else one."""
    runs = p95_runs(s)
    if not runs:
        return "-"
    value = statistics.median(runs)
    return f"{value:.2f}" if value < 1 else f"{value:,.1f}"


def _retransmits(s: ConfigSummary | None) -> str:
    if s is None or s.goodput is None:
        return "-"
    return retransmits_cell(s)


def _either(row: Row, cell: Any) -> str:
    """A setting's cell, or ``A → B`` when the paired configurations differ in it."""
    values = [cell(s) for s in (row.a, row.b) if s is not None]
    return values[0] if len(set(values)) == 1 else " → ".join(values)


def short_verdict(row: Row) -> str:
    if row.a is None:
        return "only in B"
    if row.b is None:
        return "only in A"
    stats = row.stats
    if stats is None:
        skipped = row.a.skipped is not None or row.b.skipped is not None
        return "skipped" if skipped else "failed"
    if stats.direction == "undecidable":
        noisy = ", within noise" if row.in_noise else ""
        return f"too few runs ({stats.n1} vs {stats.n2}){noisy}"
    if row.in_noise:
        return f"within noise (CV {row.noise_pct:.1f}%)"
    if stats.direction == "none" or stats.ratio is None:
        return "no significant difference"
    return f"B {stats.direction} by {abs(stats.ratio - 1):.1%}"


def _statistics(row: Row) -> list[str]:
    stats = row.stats
    if stats is None or stats.ratio is None:
        return ["-", "-", "-"]
    ci = "-" if stats.ratio_ci is None else "{:.3f}-{:.3f}".format(*stats.ratio_ci)
    return [f"{stats.ratio:.3f}", ci, significance.p_text(stats.p)]


def rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    summaries = [s for r in comparison.rows for s in (r.a, r.b) if s is not None]
    ignored = comparison.fixed_paths() | {"tunnel.kind"}
    axes = [a for a in varying_axes(summaries) if a in AXIS_HEADINGS and a not in ignored]
    header = ["tunnel", *(AXIS_HEADINGS[a] for a in axes), "A Mbit/s", "B Mbit/s"]
    header += ["B/A", "95% CI", "p", "verdict", "A p95 ms", "B p95 ms", "RTT p95 verdict"]
    header += ["A retrans", "B retrans"]
    body = []
    for row in comparison.rows:
        settings = [_either(row, lambda s, a=a: axis_value(s, a)) for a in axes]
        body.append(
            [_either(row, lambda s: s.label), *settings, _median(row.a), _median(row.b),
             *_statistics(row), short_verdict(row), _p95(row.a), _p95(row.b),
             short_latency_verdict(row), _retransmits(row.a), _retransmits(row.b)]
        )  # fmt: skip
    return header, body


# --- text around the table ---


def environment_lines(comparison: Comparison) -> list[str]:
    if not comparison.environment_changes:
        return ["Environment: the same in both runs."]
    return ["Environment differences (A → B):"] + [
        f"  {key}: {json.dumps(a)} → {json.dumps(b)}"
        for key, a, b in comparison.environment_changes
    ]


def explanation(comparison: Comparison) -> list[str]:
    lines = [
        "B/A: B's median goodput over A's, with its 95% bootstrap interval; p: two-sided "
        "Mann-Whitney rank test of B's runs against A's. A difference is called when "
        f"p < {significance.ALPHA:g}; see docs/statistics.md."
    ]
    undecidable = {
        (s.n1, s.n2): s
        for s in (r.stats for r in comparison.rows)
        if s is not None and s.direction == "undecidable"
    }
    for stats in undecidable.values():
        lines.append(stats.verdict[0].upper() + stats.verdict[1:] + ".")
    if any(r.latency_stats is not None for r in comparison.rows):
        lines.append(
            "A/B p95 ms: the median over the runs of each run's loaded round trip's 95th"
            " percentile; RTT p95 verdict: the same rank test on those values (higher is"
            " worse)."
        )
    if any(r.in_noise for r in comparison.rows):
        lines.append(
            "Within noise: not significant, and the medians differ by less than this"
            " machine's noise (the larger CV of the two runs' baselines for that"
            " configuration); see docs/statistics.md."
        )
    summaries = [s for r in comparison.rows for s in (r.a, r.b) if s is not None]
    if note := retransmits_note(summaries):
        lines.append(note)
    return lines


#: What the terminal leaves out first when the table is wider than it: the verdicts,
#: goodput's and the round trip's, stay longest, with the ratio they are about.
DROPPABLE = (
    "A retrans",
    "B retrans",
    "95% CI",
    "A p95 ms",
    "B p95 ms",
    "p",
    "A Mbit/s",
    "B Mbit/s",
)


def render_table(comparison: Comparison, width: int | None = None) -> str:
    """The terminal's comparison; with ``width``, within it: the prose wrapped and the
    table without its :data:`DROPPABLE` columns, in order, until it fits, saying which."""
    header, body = rows(comparison)
    numeric = {i for i, h in enumerate(header) if h in NUMERIC}
    head = [f"A: {comparison.a.describe()}", f"B: {comparison.b.describe()}"]
    head += environment_lines(comparison)
    tail = explanation(comparison)
    if width is None:
        table = aligned(header, body, numeric)
    else:
        head, tail = wrapped(head, width), wrapped(tail, width)
        table, left_out = fitted(header, body, numeric, width, DROPPABLE)
        if max(map(len, table)) > width:
            # Still wider: a paragraph a pair, every column named, nothing left out.
            table, left_out = _records(header, body, width, header.index("A Mbit/s") - 1), []
        if left_out:
            table += wrap(f"(left out to fit {width} columns: {', '.join(left_out)})", width)
    return "\n".join([*head, "", *table, "", *tail])


def _records(header: list[str], body: list[list[str]], width: int, axes: int) -> list[str]:
    """Each pair as ``tunnel · axes: heading value; ...`` wrapped to ``width``; the
    first ``axes`` + 1 cells name the pair."""
    out: list[str] = []
    for row in body:
        named = " · ".join(c for c in row[: axes + 1] if c and c != "-")
        rest = zip(header[axes + 1 :], row[axes + 1 :], strict=True)
        cells = "; ".join(f"{h} {c}" for h, c in rest)
        out += wrap(f"{named}: {cells}", width, hanging="    ")
    return out


def render_markdown(comparison: Comparison) -> str:
    header, body = rows(comparison)
    numeric = {i for i, h in enumerate(header) if h in NUMERIC}
    out = [
        f"# Comparison: {comparison.a.name} (A) and {comparison.b.name} (B)",
        "",
        f"- **A:** {escape(comparison.a.describe())}",
        f"- **B:** {escape(comparison.b.describe())}",
    ]
    if comparison.environment_changes:
        out += ["- **Environment differences (A → B):**"]
        out += [
            f"  - {key}: `{json.dumps(a)}` → `{json.dumps(b)}`"
            for key, a, b in comparison.environment_changes
        ]
    else:
        out += ["- **Environment:** the same in both runs"]
    out += ["", *markdown_table(header, body, numeric), ""]
    out += [line + "\n" for line in explanation(comparison)]
    return "\n".join(out).rstrip("\n") + "\n"


def _side_json(side: Side) -> dict[str, Any]:
    return {
        "db": str(side.db),
        "run_id": side.run.id,
        "label": side.run.label,
        "selector": None if side.selector is None else str(side.selector),
        "description": side.describe(),
    }


def _config_json(s: ConfigSummary | None) -> dict[str, Any] | None:
    if s is None:
        return None
    g = s.goodput
    return {
        "label": s.label,
        "config": s.config.to_dict(),
        "status": "skipped" if s.skipped is not None else ("failed" if g is None else "ok"),
        "n": 0 if g is None else g.n,
        "goodput_mbit": None if g is None else [mbit(v) for v in g.values],
        "median_mbit": None if g is None else mbit(g.median),
        "median_ci95_mbit": None if g is None or g.ci is None else [mbit(v) for v in g.ci],
        "retransmits_median": None if s.retransmits is None else s.retransmits.median,
        "retransmits_source": s.retransmits_metric,
        "loaded_p95_ms": list(p95_runs(s)) or None,
        "loaded_p95_median_ms": statistics.median(p95_runs(s)) if p95_runs(s) else None,
    }


def _row_json(row: Row) -> dict[str, Any]:
    stats = row.stats
    out: dict[str, Any] = {
        "label": _either(row, lambda s: s.label),
        "a": _config_json(row.a),
        "b": _config_json(row.b),
        "ratio": None,
        "ratio_ci95": None,
        "p_value": None,
        "method": None,
        "significant": None,
        "can_be_significant": None,
        "verdict": short_verdict(row),
        "noise_pct": row.noise_pct,
        "latency": _latency_json(row),
    }
    if stats is not None:
        out |= _stats_json(stats, row.verdict)
    return out


def _stats_json(stats: significance.Comparison, verdict: str) -> dict[str, Any]:
    return {
        "ratio": stats.ratio,
        "ratio_ci95": None if stats.ratio_ci is None else list(stats.ratio_ci),
        "p_value": stats.p,
        "method": stats.method,
        "significant": stats.significant,
        "can_be_significant": stats.can_be_significant,
        "verdict": verdict,
    }


def _latency_json(row: Row) -> dict[str, Any] | None:
    """B's loaded p95 round trips against A's, as the goodput's are; None without them."""
    stats = row.latency_stats
    return None if stats is None else _stats_json(stats, latency_verdict(stats))


def render_json(comparison: Comparison) -> str:
    document = {
        "format": "tunnelbench-compare",
        "format_version": JSON_FORMAT_VERSION,
        "alpha": significance.ALPHA,
        "a": _side_json(comparison.a),
        "b": _side_json(comparison.b),
        "environment_changes": [
            {"key": key, "a": a, "b": b} for key, a, b in comparison.environment_changes
        ],
        "pairs": [_row_json(row) for row in comparison.rows],
    }
    return json.dumps(document, indent=2)


def build(a: str, b: str, db: Path, *, where: tuple[str, str] = ("A", "B")) -> Comparison:
    """The comparison of the sides written ``a`` and ``b``; ``where`` names the two
    arguments in error messages."""
    refs = [SideRef.parse(text, db, name) for text, name in zip((a, b), where, strict=True)]
    side_a, side_b = (
        load(ref.run, ref.selector, name) for ref, name in zip(refs, where, strict=True)
    )
    return compare(side_a, side_b)


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UserError(
            f"--format: {shown(fmt)} is not available for a comparison;"
            f" allowed: {', '.join(FORMATS)}{did_you_mean(fmt, FORMATS)}"
        )


# --- the regression gate ---


def slower(comparison: Comparison, pct: float) -> list[Row]:
    """The pairs where B is significantly slower than A (the rank test, p < alpha) and
    its median is more than ``pct`` percent below A's: what ``--fail-if-slower`` fails on."""
    return [
        row
        for row in comparison.rows
        if row.stats is not None
        and row.stats.direction == "slower"
        and row.change_pct is not None
        and row.change_pct < -pct
    ]


def latency_worse(comparison: Comparison, pct: float) -> list[Row]:
    """The pairs where B's loaded round trip (each run's p95) is significantly longer
    than A's, its median more than ``pct`` percent above A's and more than
    :data:`LATENCY_FLOOR_MS` longer: what ``--fail-if-latency-worse`` fails on."""
    return [
        row
        for row in comparison.rows
        if row.latency_stats is not None
        and row.latency_stats.significant
        and row.latency_stats.can_be_significant
        and row.latency_change_pct is not None
        and row.latency_change_pct > pct
        and statistics.median(p95_runs(row.b)) - statistics.median(p95_runs(row.a))
        > LATENCY_FLOOR_MS
    ]


def latency_above(comparison: Comparison, ms: float) -> list[Row]:
    """The pairs whose B configuration's median loaded p95 is above ``ms``: what
    ``--fail-if-latency-above`` fails on (a bound, so no test: the median is the
    figure)."""
    return [
        row for row in comparison.rows if (runs := p95_runs(row.b)) and statistics.median(runs) > ms
    ]


def latency_undecided(comparison: Comparison) -> list[Row]:
    """Pairs whose runs are too few for the rank test on their round trips."""
    return [
        r
        for r in comparison.rows
        if r.latency_stats is not None and r.latency_stats.direction == "undecidable"
    ]


def undecided(comparison: Comparison) -> list[Row]:
    """Pairs whose runs are too few for the rank test to reach p < alpha: a gate cannot
    see a slowdown there, whatever its size."""
    return [
        r for r in comparison.rows if r.stats is not None and r.stats.direction == "undecidable"
    ]


def pair_name(comparison: Comparison, row: Row) -> str:
    """``wireguard (wireguard-go), streams 4``: the pair's label and varying settings."""
    header, body = rows(comparison)
    cells = body[comparison.rows.index(row)]
    settings = [
        f"{heading} {value}"
        for heading, value in zip(header[1 : len(cells)], cells[1:], strict=False)
        if heading in AXIS_HEADINGS.values()
    ]
    return ", ".join([cells[0], *settings])
