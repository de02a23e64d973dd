"""Two runs side by side: each configuration's median in run A and run B and the change.

Configurations are matched by their key (equal settings); one that only one run has is
listed as such. A change is put next to whether the two runs' min-max ranges overlap: a
change inside the run-to-run spread is not evidence of a difference. What differs between
the two machines or software (kernel, versions) is listed above the table.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from tunnelbench.analysis.summary import ConfigSummary, summarize_run, varying_axes
from tunnelbench.errors import UserError
from tunnelbench.plan import Experiment, flatten
from tunnelbench.report.markdown import escape
from tunnelbench.report.markdown import table as markdown_table
from tunnelbench.report.runs import utc
from tunnelbench.report.table import AXIS_HEADINGS, aligned, axis_value
from tunnelbench.store import RunRecord, Store
from tunnelbench.units import mbit

FORMATS = ("table", "md")
NUMERIC = {"A Mbit/s", "B Mbit/s", "change", "A retrans", "B retrans", "A % base", "B % base"}
NUMERIC |= {AXIS_HEADINGS[a] for a in ("traffic.streams", "traffic.family", "tunnel.mtu")}
NUMERIC |= {AXIS_HEADINGS[a] for a in ("lab.lan_mtu", "lab.wan.mtu", "lab.wan.queue_limit")}
NUMERIC |= {AXIS_HEADINGS[a] for a in ("lab.wan.rate", "traffic.udp_rate", "tunnel.cpu_budget")}


@dataclass(frozen=True)
class RunRef:
    """A run named on the command line: ``RUN`` or ``latest`` in the ``--db`` database,
    ``DATABASE`` (its latest run) or ``DATABASE:RUN``."""

    db: Path
    run: str

    @classmethod
    def parse(cls, text: str, default_db: Path) -> "RunRef":
        def is_run(ref: str) -> bool:
            return ref.isdigit() or ref == "latest"

        if is_run(text):
            return cls(default_db, text)
        head, sep, tail = text.rpartition(":")
        if sep and is_run(tail) and Path(head).is_file():
            return cls(Path(head), tail)
        if Path(text).is_file():
            return cls(Path(text), "latest")
        raise UserError(
            f"--compare: {text!r} is not a run id, 'latest', a results database or DATABASE:RUN"
        )


@dataclass(frozen=True)
class Side:
    db: Path
    run: RunRecord
    summaries: list[ConfigSummary]

    @property
    def by_key(self) -> dict[str, ConfigSummary]:
        return {s.key: s for s in self.summaries}

    def describe(self) -> str:
        name = Experiment.from_dict(self.run.experiment).name or "benchmark"
        when = utc(self.run.started_at)
        return f"run {self.run.id} in {self.db} ({name}, {when}, {self.run.status})"


@dataclass(frozen=True)
class Row:
    key: str
    a: ConfigSummary | None
    b: ConfigSummary | None

    @property
    def summary(self) -> ConfigSummary:
        return self.a or self.b  # type: ignore[return-value]

    @property
    def change_pct(self) -> float | None:
        """(B - A) / A of the medians, in percent."""
        if self.a is None or self.b is None or not self.a.goodput or not self.b.goodput:
            return None
        if self.a.goodput.median == 0:
            return None
        return 100.0 * (self.b.goodput.median - self.a.goodput.median) / self.a.goodput.median

    @property
    def ranges_overlap(self) -> bool | None:
        """Whether the min-max ranges of A's and B's runs overlap."""
        if self.a is None or self.b is None or not self.a.goodput or not self.b.goodput:
            return None
        a, b = self.a.goodput, self.b.goodput
        return a.minimum <= b.maximum and b.minimum <= a.maximum


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    rows: list[Row]
    environment_changes: list[tuple[str, object, object]]  # (key, in A, in B)


def load(ref: RunRef) -> Side:
    store = Store.open_existing(ref.db)
    try:
        run = store.run(ref.run)
        return Side(ref.db, run, summarize_run(store.trials(run.id)))
    finally:
        store.close()


def compare(a: Side, b: Side) -> Comparison:
    b_by_key = b.by_key
    rows = [Row(s.key, s, b_by_key.get(s.key)) for s in a.summaries]
    a_keys = {s.key for s in a.summaries}
    rows += [Row(s.key, None, s) for s in b.summaries if s.key not in a_keys]
    env_a, env_b = flatten(a.run.environment), flatten(b.run.environment)
    changes = [
        (key, env_a.get(key), env_b.get(key))
        for key in dict.fromkeys([*env_a, *env_b])
        if env_a.get(key) != env_b.get(key)
    ]
    return Comparison(a, b, rows, changes)


def _median(s: ConfigSummary | None) -> str:
    if s is None:
        return "-"
    if s.skipped is not None:
        return "skipped"
    return f"{mbit(s.goodput.median):,.0f}" if s.goodput else "failed"


def _retransmits(s: ConfigSummary | None) -> str:
    if s is None or s.goodput is None:
        return "-"
    return f"{s.retransmits.median:,.0f}" if s.retransmits else "n/a"


def _pct(s: ConfigSummary | None) -> str:
    if s is None or s.pct_of_baseline is None:
        return "-"
    return f"{s.pct_of_baseline:.0f}%"


def _change(row: Row) -> str:
    if row.a is None:
        return "only in B"
    if row.b is None:
        return "only in A"
    change = row.change_pct
    return "-" if change is None else f"{change:+.1f}%"


def _overlap(row: Row) -> str:
    overlap = row.ranges_overlap
    return "-" if overlap is None else ("yes" if overlap else "no")


def rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    summaries = [r.summary for r in comparison.rows]
    axes = [a for a in varying_axes(summaries) if a in AXIS_HEADINGS and a != "tunnel.kind"]
    header = ["tunnel", *(AXIS_HEADINGS[a] for a in axes)]
    header += ["A Mbit/s", "B Mbit/s", "change", "ranges overlap"]
    header += ["A retrans", "B retrans", "A % base", "B % base"]
    body = []
    for row in comparison.rows:
        settings = [axis_value(row.summary, a) for a in axes]
        body.append(
            [row.summary.label, *settings, _median(row.a), _median(row.b), _change(row),
             _overlap(row), _retransmits(row.a), _retransmits(row.b), _pct(row.a), _pct(row.b)]
        )  # fmt: skip
    return header, body


def _environment_lines(comparison: Comparison) -> list[str]:
    if not comparison.environment_changes:
        return ["Environment: the same in both runs."]
    return ["Environment differences (A → B):"] + [
        f"  {key}: {json.dumps(a)} → {json.dumps(b)}"
        for key, a, b in comparison.environment_changes
    ]


def _explanation(comparison: Comparison) -> str:
    return (
        "Change: B's median goodput against A's; ranges overlap: whether the min-max of "
        "A's runs and of B's runs overlap (a change within the run-to-run spread is not "
        "evidence of a difference)."
    )


def render_table(comparison: Comparison) -> str:
    header, body = rows(comparison)
    numeric = {i for i, h in enumerate(header) if h in NUMERIC}
    out = [f"A: {comparison.a.describe()}", f"B: {comparison.b.describe()}"]
    out += _environment_lines(comparison)
    out += ["", *aligned(header, body, numeric)]
    out += ["", _explanation(comparison)]
    return "\n".join(out)


def render_markdown(comparison: Comparison) -> str:
    header, body = rows(comparison)
    numeric = {i for i, h in enumerate(header) if h in NUMERIC}
    out = [
        f"# Comparison: run {comparison.a.run.id} (A) and run {comparison.b.run.id} (B)",
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
    out += ["", *markdown_table(header, body, numeric), "", _explanation(comparison)]
    return "\n".join(out) + "\n"


def render(a: RunRef, b: RunRef, fmt: str) -> str:
    if fmt not in FORMATS:
        raise UserError(
            f"--format: {fmt!r} is not available with --compare; allowed: {', '.join(FORMATS)}"
        )
    comparison = compare(load(a), load(b))
    return render_table(comparison) if fmt == "table" else render_markdown(comparison)
