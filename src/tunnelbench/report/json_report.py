"""A run as JSON: each configuration with its medians, its runs and % of baseline."""

import json
from typing import Any

from tunnelbench.analysis.stats import Summary
from tunnelbench.analysis.summary import ConfigSummary, summarize_run
from tunnelbench.store import Store

FORMAT_VERSION = 1


def _summary(summary: Summary | None, scale: float = 1.0) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "n": summary.n,
        "median": summary.median / scale,
        "min": summary.minimum / scale,
        "max": summary.maximum / scale,
        "cv": summary.cv,
    }


def configuration(store: Store, s: ConfigSummary) -> dict[str, Any]:
    return {
        "key": s.key,
        "label": s.label,
        "config": s.config.to_dict(),
        "resolved": s.resolved,
        "baseline_key": s.baseline_key,
        "goodput_mbit": _summary(s.goodput, 1e6),
        "retransmits": _summary(s.retransmits),
        "pct_of_baseline": s.pct_of_baseline,
        "busiest_core": None if s.busiest_core is None else vars(s.busiest_core),
        "process_cpu_pct": s.processes_cpu,
        "runs": [
            {
                "trial_id": t.id,
                "seq": t.seq,
                "repetition": t.repetition,
                "status": t.status,
                "error": t.error,
                "goodput_mbit": t.metrics["goodput_bps"] / 1e6
                if "goodput_bps" in t.metrics
                else None,
                "retransmits": t.metrics.get("retransmits"),
                "resolved": t.resolved,
                "metrics": t.metrics,
                "intervals_mbit": [v / 1e6 for v in store.artifact(t.id, "intervals") or []],
            }
            for t in s.trials
        ],
    }


def document(store: Store, ref: str) -> dict[str, Any]:
    run = store.run(ref)
    summaries = summarize_run(store.trials(run.id))
    return {
        "format_version": FORMAT_VERSION,
        "run": {
            "id": run.id,
            "started_at": run.started_at,
            "ended_at": run.ended_at,
            "status": run.status,
            "command_line": run.command_line,
            "experiment": run.experiment,
        },
        "environment": run.environment,
        "configurations": [configuration(store, s) for s in summaries],
    }


def render(store: Store, ref: str) -> str:
    return json.dumps(document(store, ref), indent=2)
