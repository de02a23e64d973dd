"""A run as CSV: one row per trial, its configuration flattened into columns.

Columns, in this order:

- ``run_id``, ``trial_id``, ``seq``, ``repetition``, ``status``, ``error``;
- ``config.<path>`` for every setting (``config.lab.wan.rate``, ``config.traffic.streams``);
- ``resolved.<key>`` for what the trial's settings became (``resolved.tunnel_mtu``);
- ``metric.<name>`` for every stored number (``metric.goodput_bps``, ``metric.cpu0.idle``).

Cells: an empty cell is a value that is not there (null, or a metric the trial lacks);
``true``/``false`` for booleans; a list as JSON (``["client","gw"]``); a float is written
with ``repr``, so it reads back as exactly the stored number.
"""

import csv
import io
import json
import re
from collections.abc import Iterable
from typing import Any

from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import flatten
from tunnelbench.model.records import TrialRecord
from tunnelbench.report.view import RunView

FIXED_COLUMNS = ("run_id", "trial_id", "seq", "repetition", "status", "error")
# Read first; the other metrics follow in name order (cpu2 before cpu10). Retransmits:
# the kernel's count over the measured window, then the generator's own (see
# tunnelbench.probes.tcp).
HEADLINE_METRICS = (
    metric.GOODPUT.name,
    metric.UPLOAD.name,
    metric.DOWNLOAD.name,
    metric.KERNEL_RETRANSMITS.name,
    metric.RETRANSMITS.name,
)


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _in_order(names: Iterable[str]) -> list[str]:
    """Distinct names in first-seen order."""
    return list(dict.fromkeys(names))


def _natural(name: str) -> list[Any]:
    """Sort key that orders the digits in a name as numbers: cpu2 < cpu10. ``re.split``
    alternates text and digits, so equal positions always hold the same type."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _metric_columns(trials: list[TrialRecord]) -> list[str]:
    names = {n for t in trials for n in t.metrics}
    first = [n for n in HEADLINE_METRICS if n in names]
    return first + sorted(names - set(first), key=_natural)


def rows(trials: list[TrialRecord]) -> tuple[list[str], list[list[str]]]:
    """The header and one row per trial."""
    configs = [flatten(t.config.to_dict()) for t in trials]
    resolved = [flatten(t.resolved.to_dict(facts=False)) for t in trials]
    config_paths = _in_order(p for c in configs for p in c)
    resolved_keys = _in_order(k for r in resolved for k in r)
    metrics = _metric_columns(trials)
    header = [*FIXED_COLUMNS]
    header += [f"config.{p}" for p in config_paths]
    header += [f"resolved.{k}" for k in resolved_keys]
    header += [f"metric.{m}" for m in metrics]
    body = []
    for t, config, res in zip(trials, configs, resolved, strict=True):
        row = [t.run_id, t.id, t.seq, t.repetition, t.status, t.error]
        row += [config.get(p) for p in config_paths]
        row += [res.get(k) for k in resolved_keys]
        row += [t.metrics.get(m) for m in metrics]
        body.append([cell(v) for v in row])
    return header, body


def render(view: RunView) -> str:
    header, body = rows(view.trials)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(body)
    return out.getvalue()
