"""Two sets of configurations side by side: is B faster than A, by how much, for sure?

The one implementation behind ``tunnelbench compare A B`` and its alias ``tunnelbench
report --compare A B``. A side is a run (``RUN``, ``latest``, ``DATABASE``,
``DATABASE:RUN``), optionally narrowed to some of its configurations by a selector
(``RUNREF@traffic.streams=4``; see :mod:`.selector`).

Configurations are paired by :mod:`.pairing`: by equal settings (ignoring the paths
either selector names, and the tunnel settings against a side of no-tunnel baselines),
then, for two runs that differ in one setting, by that setting, saying the rule. A
configuration without a partner is listed as such. For each pair the goodput of B's runs
is compared with A's (:mod:`tunnelbench.analysis.significance`): the ratio of medians
with its 95% interval, the rank test's p-value, and a plain verdict; so are the loaded
round trips (each run's 95th percentile under load), with a verdict of their own: a
change that buys goodput with latency says both. A difference the test does not call is
"not decided", unless its whole interval lies within this machine's noise (the pair's
baseline CV): then "no difference". What differs between the two runs' environments
(kernel, versions) is listed above the table.
"""

import json
import statistics
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tunnelbench.analysis import noise, significance
from tunnelbench.analysis.summary import ConfigSummary, varying_axes
from tunnelbench.bench.store import Store
from tunnelbench.echo import capped
from tunnelbench.errors import UserError
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import ROLES, flatten
from tunnelbench.model.records import NO_VM, TCG, RunRecord
from tunnelbench.report import pairing, view
from tunnelbench.report.fit import aligned, fitted, wrap, wrapped
from tunnelbench.report.pairing import Pairing
from tunnelbench.report.runs import utc
from tunnelbench.report.selector import Selector, selector_text
from tunnelbench.report.table import (
    AXIS_HEADINGS,
    axis_value,
    retransmits_cell,
    retransmits_note,
)
from tunnelbench.units import mbit

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
        name = self.run.experiment.name or "benchmark"
        when = utc(self.run.started_at)
        where = f" where {self.selector}" if self.selector else ""
        label = f" «{self.run.label}»" if self.run.label else ""
        status = f"({name}, {when}, {self.run.status})"
        return f"run {self.run.id}{label} in {self.db} {status}{where}"

    @property
    def only_baselines(self) -> bool:
        return all(s.config.tunnel.kind is TunnelKind.NONE for s in self.summaries)


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
    def equivalent(self) -> bool:
        """Not shown significant, and the whole 95% interval of B/A lies within ± this
        machine's noise: the runs show any difference is smaller than the noise. The
        only case called "no difference"; without a noise figure, never."""
        stats, margin = self.stats, self.noise_pct
        return (
            stats is not None
            and stats.can_be_significant
            and not stats.significant
            and margin is not None
            and stats.within(margin)
        )

    @property
    def verdict(self) -> str:
        """The comparison's sentence, and whether the difference is within the noise."""
        if self.stats is None:
            return short_verdict(self)
        if self.equivalent:
            assert self.stats.ratio_ci is not None
            low, high = (end - 1 for end in self.stats.ratio_ci)
            return (
                f"no difference: the 95% CI {low:+.1%}..{high:+.1%} lies within this"
                f" machine's noise (± CV {self.noise_pct:.1f}% of the baseline),"
                f" {significance.format_p(self.stats.p)}"
            )
        if not self.in_noise:
            return self.stats.verdict
        return (
            f"{self.stats.verdict}; the {self.change_pct:+.1f}% between the medians is"
            f" smaller than this machine's noise (CV {self.noise_pct:.1f}% of the baseline)"
        )

    @cached_property
    def changed(self) -> list[tuple[str, Any, Any]]:
        """The settings in which B's configuration differs from A's: (path, A's value,
        B's value); empty for a configuration on one side only."""
        if self.a is None or self.b is None:
            return []
        flat_a, flat_b = flatten(self.a.config.to_dict()), flatten(self.b.config.to_dict())
        return [
            (path, flat_a.get(path), flat_b.get(path))
            for path in dict.fromkeys([*flat_a, *flat_b])
            if flat_a.get(path) != flat_b.get(path)
        ]


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    rows: list[Row]
    environment_changes: list[tuple[str, object, object]]  # (key, in A, in B)
    pairing: Pairing = field(default_factory=Pairing)

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
    +18.1%..+156.3%, p = 0.0079)``, or beyond twice A's a factor (``higher`` and
    :func:`~.significance.factor`); higher is worse."""
    if (
        stats.direction in (significance.Change.UNDECIDABLE, significance.Change.NONE)
        or stats.ratio is None
    ):
        return stats.verdict
    change = stats.ratio - 1
    ci = ""
    if stats.ratio_ci is not None and stats.ratio > significance.FACTOR_ABOVE:
        ci = "95% CI {}..{}, ".format(*map(significance.factor, stats.ratio_ci))
    elif stats.ratio_ci is not None:
        low, high = (end - 1 for end in stats.ratio_ci)
        ci = f"95% CI {low:+.1%}..{high:+.1%}, "
    way = "higher" if change > 0 else "lower"
    size = significance.by(stats.ratio)
    return f"B's loaded RTT p95 is {way} {size} ({ci}{significance.format_p(stats.p)})"


def short_latency_verdict(row: "Row") -> str:
    stats = row.latency_stats
    if stats is None:
        return "-"
    if stats.direction is significance.Change.UNDECIDABLE:
        return f"too few runs ({stats.n1} vs {stats.n2})"
    if stats.direction is significance.Change.NONE or stats.ratio is None:
        return "not decided"
    way = "higher" if stats.ratio > 1 else "lower"
    return f"B {way} {significance.by(stats.ratio, 0)}"


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


def compare(a: Side, b: Side) -> Comparison:
    """Pair A's configurations with B's (:mod:`.pairing`) and compare each pair."""
    ignored = (a.selector.paths if a.selector else frozenset()) | (
        b.selector.paths if b.selector else frozenset()
    )
    # A baseline has no tunnel settings: a baseline side pairs with any tunnel.
    ignore_tunnel = bool(ignored) and a.only_baselines != b.only_baselines
    pairs, rule = pairing.pair(a.summaries, b.summaries, ignored, ignore_tunnel)
    rows = [Row(x, y) for x, y in pairs]
    for row in rows:
        _refuse_emulated(row)
    env_a, env_b = flatten(a.run.environment.to_dict()), flatten(b.run.environment.to_dict())
    changes = [
        (key, env_a.get(key), env_b.get(key))
        for key in dict.fromkeys([*env_a, *env_b])
        if env_a.get(key) != env_b.get(key)
    ]
    return Comparison(a, b, rows, changes, rule)


def _emulation(s: ConfigSummary) -> str:
    """How the configuration's CPU ran: ``tcg`` (emulated), ``kvm`` or ``none`` (this
    machine's kernel; also every run recorded before labs ran in guests)."""
    return s.resolved.where.virtualization or NO_VM


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


def median_cell(s: ConfigSummary | None) -> str:
    if s is None:
        return "-"
    if s.skipped is not None:
        return "skipped"
    return f"{mbit(s.goodput.median):,.0f}" if s.goodput else "failed"


def p95_cell(s: ConfigSummary | None) -> str:
    """The median over the runs of each run's loaded p95: two decimals below 1 ms (a
    veth lab's round trips are tens of microseconds), else one."""
    runs = p95_runs(s)
    if not runs:
        return "-"
    value = statistics.median(runs)
    return f"{value:.2f}" if value < 1 else f"{value:,.1f}"


def retransmits_text(s: ConfigSummary | None) -> str:
    if s is None or s.goodput is None:
        return "-"
    return retransmits_cell(s)


def either(row: Row, cell: Any) -> str:
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
    if stats.direction is significance.Change.UNDECIDABLE:
        noisy = ", within noise" if row.in_noise else ""
        return f"too few runs ({stats.n1} vs {stats.n2}){noisy}"
    if row.equivalent:
        return f"no difference (CI within ±{row.noise_pct:.1f}%)"
    if row.in_noise:
        return f"not decided, within noise (CV {row.noise_pct:.1f}%)"
    if stats.direction is significance.Change.NONE or stats.ratio is None:
        return "not decided"
    return f"B {stats.direction} {significance.by(stats.ratio)}"


def _statistics(row: Row) -> list[str]:
    stats = row.stats
    if stats is None or stats.ratio is None:
        return ["-", "-", "-"]
    ci = "-" if stats.ratio_ci is None else "{:.3f}-{:.3f}".format(*stats.ratio_ci)
    return [f"{stats.ratio:.3f}", ci, significance.p_text(stats.p)]


def table_axes(comparison: Comparison) -> list[str]:
    """The setting paths the table shows as columns: those that vary, but the tunnel's
    kind (the first column) and what the selectors fix."""
    summaries = [s for r in comparison.rows for s in (r.a, r.b) if s is not None]
    ignored = comparison.fixed_paths() | {"tunnel.kind"}
    return [a for a in varying_axes(summaries) if a in AXIS_HEADINGS and a not in ignored]


def rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    axes = table_axes(comparison)
    header = ["tunnel", *(AXIS_HEADINGS[a] for a in axes), "A Mbit/s", "B Mbit/s"]
    header += ["B/A", "95% CI", "p", "verdict", "A p95 ms", "B p95 ms", "RTT p95 verdict"]
    header += ["A retrans", "B retrans"]
    body = []
    for row in comparison.rows:
        settings = [either(row, lambda s, a=a: axis_value(s, a)) for a in axes]
        body.append(
            [either(row, lambda s: s.label), *settings, median_cell(row.a), median_cell(row.b),
             *_statistics(row), short_verdict(row), p95_cell(row.a), p95_cell(row.b),
             short_latency_verdict(row), retransmits_text(row.a), retransmits_text(row.b)]
        )  # fmt: skip
    return header, body


# --- text around the table ---


def pairing_lines(comparison: Comparison) -> list[str]:
    """How the configurations were paired, when more than equal settings was tried:
    ``Paired by differing tunnel.mtu: 1420 → 1280.``, or why not."""
    text = comparison.pairing.text
    return [] if text is None else [text[0].upper() + text[1:] + "."]


def environment_lines(comparison: Comparison) -> list[str]:
    if not comparison.environment_changes:
        return ["Environment: the same in both runs."]
    return ["Environment differences (A → B):"] + [
        f"  {key}: {json.dumps(a)} → {json.dumps(b)}"
        for key, a, b in comparison.environment_changes
    ]


def _not_decided(row: Row) -> bool:
    stats = row.stats
    return (
        stats is not None
        and stats.can_be_significant
        and not stats.significant
        and not row.equivalent
    )


def explanation(comparison: Comparison) -> list[str]:
    lines = [
        "B/A: B's median goodput over A's, with its 95% bootstrap interval; p: two-sided "
        "Mann-Whitney rank test of B's runs against A's. A difference is called when "
        f"p < {significance.ALPHA:g}; see docs/statistics.md."
    ]
    undecidable = {
        (s.n1, s.n2): s
        for s in (r.stats for r in comparison.rows)
        if s is not None and s.direction is significance.Change.UNDECIDABLE
    }
    for stats in undecidable.values():
        lines.append(stats.verdict[0].upper() + stats.verdict[1:] + ".")
    if any(r.latency_stats is not None for r in comparison.rows):
        lines.append(
            "A/B p95 ms: the median over the runs of each run's loaded round trip's 95th"
            " percentile; RTT p95 verdict: the same rank test on those values (higher is"
            " worse)."
        )
    undecided = [r for r in comparison.rows if r.stats is not None and _not_decided(r)]
    if undecided:
        lines.append(
            "Not decided: the rank test did not call a difference (p >= 0.05), yet the 95%"
            " interval of B/A reaches beyond this machine's noise, so the runs cannot say"
            " the two are equal either; more runs can decide."
        )
    if any(r.equivalent for r in comparison.rows):
        lines.append(
            "No difference: not significant, and the whole 95% interval of B/A lies"
            " within ± this machine's noise (the larger CV of the two runs' baselines)."
        )
    if any(r.in_noise and not r.equivalent for r in comparison.rows):
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
    head += pairing_lines(comparison) + environment_lines(comparison)
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
        "label": either(row, lambda s: s.label),
        "a": _config_json(row.a),
        "b": _config_json(row.b),
        "ratio": None,
        "ratio_ci95": None,
        "p_value": None,
        "method": None,
        "significant": None,
        "can_be_significant": None,
        "verdict": short_verdict(row),
        "changed": [
            {"path": path, "a": pairing.plain(a), "b": pairing.plain(b)}
            for path, a, b in row.changed
        ],
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
        "pairing": comparison.pairing.to_dict(),
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


# --- the regression gate ---


def slower(comparison: Comparison, pct: float) -> list[Row]:
    """The pairs where B is significantly slower than A (the rank test, p < alpha) and
    its median is more than ``pct`` percent below A's: what ``--fail-if-slower`` fails on."""
    return [
        row
        for row in comparison.rows
        if row.stats is not None
        and row.stats.direction is significance.Change.SLOWER
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
        if r.latency_stats is not None
        and r.latency_stats.direction is significance.Change.UNDECIDABLE
    ]


def undecided(comparison: Comparison) -> list[Row]:
    """Pairs whose runs are too few for the rank test to reach p < alpha: a gate cannot
    see a slowdown there, whatever its size."""
    return [
        r
        for r in comparison.rows
        if r.stats is not None and r.stats.direction is significance.Change.UNDECIDABLE
    ]


#: Settings a configuration's label already says (``wireguard (boringtun)``).
LABELLED = ("tunnel.kind", "tunnel.implementation")


def pair_name(
    comparison: Comparison, row: Row, leave_out: Collection[str] = (), axes: list[str] | None = None
) -> str:
    """``wireguard (wireguard-go), streams 1 → 4``: the pair's label, its varying
    settings, and every other setting that changed from A to B (those a selector fixed
    too), but the paths in ``leave_out``; ``axes``: :func:`table_axes`, when known."""
    axes = table_axes(comparison) if axes is None else axes
    parts = [either(row, lambda s: s.label)]
    for path in axes:
        if path not in leave_out and path not in LABELLED:
            value = either(row, lambda s, path=path: axis_value(s, path))
            parts.append(f"{AXIS_HEADINGS[path]} {value}")
    for path, _, _ in row.changed:
        if path in axes or path in leave_out or path in LABELLED:
            continue  # a column, or the label says it
        parts.append(f"{AXIS_HEADINGS.get(path, path)} {changed_text(row, path)}")
    return ", ".join(parts)


def changed_text(row: Row, path: str) -> str:
    """``1 → 4``: a setting's value in A's configuration and in B's, as cells show it."""
    assert row.a is not None and row.b is not None
    try:
        a, b = axis_value(row.a, path), axis_value(row.b, path)
    except AttributeError:  # a setting the configuration's classes do not hold as named
        a, b = (selector_text(path, axis_values(s, path)) for s in (row.a, row.b))
    return f"{a} → {b}"


# --- what a gate cannot judge ---


@dataclass(frozen=True)
class Unjudged:
    """A configuration a gate could not compare, and whether that fails the gate."""

    row: Row
    reason: str
    fails: bool


def unjudged(comparison: Comparison) -> list[Unjudged]:
    """The pairs a gate cannot judge, with why: A's configurations with no partner in B
    and B's configurations that failed or were skipped where A's measured (each fails a
    gate: B has no data for them); and, not failing, configurations new in B, A's that
    failed, and configurations both runs skipped."""
    out: list[Unjudged] = []
    for row in comparison.rows:
        a, b = row.a, row.b
        if b is None:
            out.append(Unjudged(row, "only in A: B has no configuration to compare it with", True))
        elif a is None:
            out.append(Unjudged(row, "only in B: new, nothing to compare it with", False))
        elif b.goodput is None and b.skipped is None:
            out.append(Unjudged(row, f"B failed: {_failures(b)}", True))
        elif b.goodput is None and a.goodput is not None:
            out.append(Unjudged(row, f"B skipped it: {b.skipped}", True))
        elif b.goodput is None:
            out.append(Unjudged(row, "skipped in both runs", False))
        elif a.goodput is None:
            why = "skipped" if a.skipped is not None else f"failed: {_failures(a)}"
            out.append(Unjudged(row, f"A {why}; nothing to compare B with", False))
    return out


def _failures(s: ConfigSummary) -> str:
    """``3 of 3 runs failed (last: iperf3 …)``."""
    failed = s.failed
    last = f" (last: {capped(failed[-1].error, 200)})" if failed and failed[-1].error else ""
    return f"{len(failed)} of {len(s.trials)} runs failed{last}"


def compared(comparison: Comparison) -> list[Row]:
    """The pairs where both sides measured goodput: what a gate judged."""
    return [r for r in comparison.rows if r.stats is not None]
