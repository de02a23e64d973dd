"""A run as JSON: the run and its experiment, the environment, every configuration with
its statistics and its trials (skipped and failed ones with their reason), and findings.

The document follows ``docs/report-schema.json``, which describes every field.
``FORMAT_VERSION`` changes whenever a field is renamed, removed or changes its meaning; a
new field is added to the schema in the same change.
"""

import json
from typing import Any

from tunnelbench import __version__
from tunnelbench.analysis.precision import Precision
from tunnelbench.analysis.stats import Summary, consistency
from tunnelbench.analysis.summary import ConfigSummary, Latency
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import Experiment, with_baselines
from tunnelbench.model.records import TrialRecord
from tunnelbench.report import findings, precision, tune
from tunnelbench.report.view import RunView

# 2: configurations gained a status, the reason they were skipped and the mean of each
# statistic; the run its normalised experiment (order and seed always present) and its
# trial counts; the document ``generator`` and ``findings``.
FORMAT_VERSION = 2


def _summary(summary: Summary | None, scale: float = 1.0) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "n": summary.n,
        "median": summary.median / scale,
        "min": summary.minimum / scale,
        "max": summary.maximum / scale,
        "mean": summary.mean / scale,
        "cv": summary.cv,
        # Statistics added without a version change (new fields, see the module docstring).
        "median_ci95": None if summary.ci is None else [v / scale for v in summary.ci],
        "consistency": consistency(summary),
    }


def config_status(s: ConfigSummary) -> str:
    """``ok`` (every trial measured), ``partial`` (some failed), ``failed`` (none
    measured) or ``skipped`` (this machine could not run it)."""
    if s.skipped is not None:
        return "skipped"
    if s.goodput is None:
        return "failed"
    return "partial" if s.failed else "ok"


def trial(view: RunView, t: TrialRecord) -> dict[str, Any]:
    """One trial: what it resolved to, what it measured, or why it did not."""
    return {
        "trial_id": t.id,
        "seq": t.seq,
        "repetition": t.repetition,
        "status": t.status,
        "error": t.error,
        "goodput_mbit": t.metrics[metric.GOODPUT.name] / 1e6
        if metric.GOODPUT.name in t.metrics
        else None,
        "retransmits": t.metrics.get(metric.RETRANSMITS.name),
        "resolved": t.resolved.to_dict(),
        "metrics": t.metrics,
        "intervals_mbit": [v / 1e6 for v in view.artifact(t.id, "intervals") or []],
    }


def _latency(latency: Latency | None) -> dict[str, Any] | None:
    """Round trips in ms: idle and under load (medians over the runs), what the load
    added, and each run's loaded 95th percentile; None for runs recorded without them."""
    if latency is None:
        return None
    return {
        "idle_ms": latency.idle_ms,
        "loaded_ms": latency.loaded_ms,
        "loaded_p95_ms": latency.loaded_p95_ms,
        "increase_ms": latency.increase_ms,
        "loaded_p95_runs_ms": list(latency.p95_runs),
    }


def _precision(p: Precision | None) -> dict[str, Any] | None:
    return None if p is None else {**p.to_dict(), "text": p.text()}


def configuration(view: RunView, s: ConfigSummary, p: Precision | None = None) -> dict[str, Any]:
    """One configuration; ``p`` its standing against an adaptive run's precision target."""
    return {
        "key": s.key,
        "label": s.label,
        "status": config_status(s),
        "skip_reason": s.skipped,
        "config": s.config.to_dict(),
        "resolved": s.resolved.to_dict(),
        "baseline_key": s.baseline_key,
        "goodput_mbit": _summary(s.goodput, 1e6),
        "retransmits": _summary(s.retransmits),
        "retransmits_source": s.retransmits_metric,
        "pct_of_baseline": s.pct_of_baseline,
        "noise_pct": s.noise_pct,
        "busiest_core": None if s.busiest_core is None else vars(s.busiest_core),
        "process_cpu_pct": s.processes_cpu,
        "latency": _latency(s.latency),
        "runs": [trial(view, t) for t in s.trials],
        "precision": _precision(p),
        **findings.configuration_json(s),
    }


def planned_trials(experiment: Experiment) -> int:
    """How many trials the experiment expands to (baselines included); with adaptive
    repetitions, the minimum (its added rounds come on top)."""
    return experiment.repetitions * len(with_baselines(experiment.configs))


def run_section(view: RunView) -> dict[str, Any]:
    run = view.run
    experiment = run.experiment
    counts = view.trial_counts
    stored = sum(counts.get(status, 0) for status in ("ok", "failed", "skipped"))
    return {
        "id": run.id,
        "label": run.label,
        "notes": run.notes,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "status": run.status,
        "command_line": run.command_line,
        "experiment": experiment.to_dict(),
        "trial_counts": {
            # A tuning session plans no trials: each step's rounds follow its measurements.
            "planned": stored if run.tune is not None else planned_trials(experiment),
            "ok": counts.get("ok", 0),
            "failed": counts.get("failed", 0),
            "skipped": counts.get("skipped", 0),
        },
    }


def document(view: RunView) -> dict[str, Any]:
    run, summaries = view.run, view.summaries
    standing = precision.standing(run)
    return {
        "format_version": FORMAT_VERSION,
        "generator": {"name": "tunnelbench", "version": __version__},
        "run": run_section(view),
        "environment": run.environment.to_dict(),
        "configurations": [configuration(view, s, standing.get(s.key)) for s in summaries],
        # Diagnosis (what limits each configuration) is not implemented yet.
        "findings": findings.run_json(summaries),
        "noise": view.noise.to_dict(),
    } | ({} if (record := tune.record_of(run)) is None else {"tune": tune.json_section(record)})


def render(view: RunView) -> str:
    return json.dumps(document(view), indent=2)
