"""Descriptive statistics of repeated measurements."""

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    minimum: float
    maximum: float
    mean: float
    cv: float | None  # coefficient of variation (sample stdev / mean); None for n < 2


def summarize(values: Sequence[float]) -> Summary | None:
    if not values:
        return None
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean if len(values) > 1 and mean != 0 else None
    return Summary(
        n=len(values),
        median=statistics.median(values),
        minimum=min(values),
        maximum=max(values),
        mean=mean,
        cv=cv,
    )
