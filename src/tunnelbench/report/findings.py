"""The diagnosis and advice of a run, as every renderer shows them.

One place words them, so the terminal, Markdown, HTML and JSON reports say the same
thing: per configuration, the verdict with its evidence, further findings, and the
advice with the setting to change and (when the run measured it) the measured gain.
"""

from typing import Any

from tunnelbench.analysis.advice import Advice
from tunnelbench.analysis.diagnosis import Finding
from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.report.table import AXIS_HEADINGS, axis_value, table_axes


def config_name(s: ConfigSummary, axes: list[str]) -> str:
    """``wireguard (wireguard-go), streams 4``: the label and the settings that vary."""
    values = [(AXIS_HEADINGS[a], axis_value(s, a)) for a in axes]
    parts = [f"{heading} {value}" for heading, value in values if value != "-"]
    return ", ".join([s.label, *parts])


def _axes(summaries: list[ConfigSummary]) -> list[str]:
    return table_axes(summaries)


def named(summaries: list[ConfigSummary]) -> list[tuple[str, ConfigSummary]]:
    """Every configuration with its name."""
    axes = _axes(summaries)
    return [(config_name(s, axes), s) for s in summaries]


def diagnosed(summaries: list[ConfigSummary]) -> list[tuple[str, ConfigSummary]]:
    """The configurations with a diagnosis (a successful trial), with their names."""
    return [(name, s) for name, s in named(summaries) if s.diagnosis is not None]


def finding_text(f: Finding) -> str:
    """``cpu-bound: ...``, or ``cpu-bound (offloads off: a lab setting): ...``."""
    return f"{f.label}: {f.summary}"


def findings(summaries: list[ConfigSummary]) -> list[str]:
    """One line per configuration: its verdict, then its further findings."""
    out = []
    for name, s in diagnosed(summaries):
        assert s.diagnosis is not None
        line = f"{name} — {finding_text(s.diagnosis.verdict)}"
        others = "; ".join(finding_text(f) for f in s.diagnosis.others)
        out.append(f"{line} (also {others})" if others else line)
    return out


def terminal_verdicts(summaries: list[ConfigSummary]) -> list[str]:
    """One line per configuration: its name and its verdict (the reports add the
    evidence and the further findings)."""
    out = []
    for name, s in diagnosed(summaries):
        assert s.diagnosis is not None
        others = len(s.diagnosis.others)
        more = f" (+{others} more finding{'s' if others > 1 else ''})" if others else ""
        out.append(f"{name}: {finding_text(s.diagnosis.verdict)}{more}")
    return out


def grouped_advice(
    summaries: list[ConfigSummary],
) -> list[tuple[Advice, list[tuple[str, ConfigSummary, Advice]]]]:
    """Each suggestion once (the first configuration's wording), with every configuration
    it is for and that configuration's own advice (what the run measured of it there)."""
    grouped: dict[str, tuple[Advice, list[tuple[str, ConfigSummary, Advice]]]] = {}
    for name, s in diagnosed(summaries):
        for a in s.advice:
            grouped.setdefault(_head(a), (a, []))[1].append((name, s, a))
    return list(grouped.values())


def _head(a: Advice) -> str:
    return f"{a.phrased} (`{a.setting}`)" if a.setting else a.phrased


def terminal_advice(summaries: list[ConfigSummary]) -> list[str]:
    """Each suggestion once, with the configurations it is for and, where the run
    measured it, what it gave there in a few words; the evidence is in the verdicts."""
    out = []
    for first, where in grouped_advice(summaries):
        names = [f"{n} ({a.measured.brief()})" if a.measured else n for n, _, a in where]
        out.append(f"→ {_head(first)} — for {'; '.join(names)}")
    return out


def advice(summaries: list[ConfigSummary]) -> list[str]:
    """Each suggestion once, for the reports: the configurations it is for, and what the
    run measured of it there with its figures and test (the evidence that triggered it
    is the configuration's verdict, under Diagnosis).

    Suggestions the run measured and refuted are kept: they answer "would X help?" too.
    """
    out = []
    for first, where in grouped_advice(summaries):
        parts = [f"{n}: {a.measured.text()}" if a.measured else n for n, _, a in where]
        why = reason(first, where[0][1])
        out.append(f"{_head(first)} — {f'{why}; ' if why else ''}for {'; '.join(parts)}")
    return out


def reason(a: Advice, s: ConfigSummary) -> str:
    """What the advice adds to the finding it rests on: ``because`` is the finding's
    summary (shown under Diagnosis already), optionally followed by ``; `` and a reason
    of the advice's own ("wireguard-go copies every packet between the kernel and
    userspace")."""
    findings_ = s.diagnosis.findings if s.diagnosis else ()
    for f in findings_:
        if a.because == f.summary:
            return ""
        if a.because.startswith(f.summary + "; "):
            return a.because[len(f.summary) + 2 :]
    return a.because


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "bound": f.bound.value,
        "summary": f.summary,
        "subject": f.subject,
        "lab_setting": f.lab_setting,
        "evidence": [{"name": e.name, "value": e.value, "unit": e.unit} for e in f.evidence],
    }


def _advice_json(a: Advice) -> dict[str, Any]:
    m = a.measured
    c = m.comparison if m is not None else None
    return {
        "setting": a.setting,
        "suggestion": a.phrased,
        "because": a.because,
        "refuted": a.refuted,
        "available": a.available,
        "measured": None
        if m is None
        else {
            "setting": m.setting,
            "value": m.value,
            "goodput_mbit": m.goodput_bps / 1e6,
            "change_pct": m.change_pct,
            "outcome": m.outcome,
            "p": None if c is None else c.p,
            "ratio_ci95": None if c is None or c.ratio_ci is None else list(c.ratio_ci),
            "runs": None if c is None else [c.n1, c.n2],
        },
        "candidates": list(a.candidates),
        "goal": a.goal,
        "text": a.text(),
    }


def configuration_json(s: ConfigSummary) -> dict[str, Any]:
    """The ceiling, verdict and advice of one configuration for the JSON report."""
    c = s.ceiling
    return {
        "ceiling": None
        if c is None
        else {
            "goodput_mbit": c.goodput_bps / 1e6,
            "efficiency": c.efficiency,
            "explain": c.explain(),
        },
        "pct_of_ceiling": s.pct_of_ceiling,
        "diagnosis": None
        if s.diagnosis is None
        else {
            "verdict": _finding_json(s.diagnosis.verdict),
            "others": [_finding_json(f) for f in s.diagnosis.others],
        },
        "advice": [_advice_json(a) for a in s.advice],
    }


SEVERITY = {
    "above-ceiling": "warning",
    "generator-bound": "warning",
    "outside-load": "warning",
    "steal": "warning",
    "too-few-runs": "warning",
}


def run_json(summaries: list[ConfigSummary]) -> list[dict[str, Any]]:
    """The run-level ``findings``: every finding of every diagnosed configuration, in the
    shape the report schema reserved for them."""
    out = []
    for name, s in diagnosed(summaries):
        assert s.diagnosis is not None
        for f in s.diagnosis.findings:
            out.append(
                {
                    "kind": f.bound.value,
                    "severity": SEVERITY.get(f.bound.value, "info"),
                    "configurations": [s.key],
                    "message": f"{name}: {f.summary}",
                    "evidence": {e.name: e.value for e in f.evidence},
                }
            )
    return out
