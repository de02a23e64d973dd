"""Descriptive statistics of repeated measurements, and the median's bootstrap interval.

The interval is a percentile bootstrap: resample the values with replacement, take each
resample's median, and read the 2.5th and 97.5th percentiles of those medians. The random
generator is seeded from the values themselves, so a report rendered twice from the same
store shows the same interval. With few values the interval is necessarily wide (with 3
values it spans almost their whole range): that is the honest answer, not a defect.
"""

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

RESAMPLES = 4000
LEVEL = 0.95


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    minimum: float
    maximum: float
    mean: float
    cv: float | None  # coefficient of variation (sample stdev / mean); None for n < 2
    ci_low: float | None = None  # bootstrap 95% interval of the median; None for n < 2
    ci_high: float | None = None

    @property
    def ci_half_width_pct(self) -> float | None:
        """Half the interval's width as a percentage of the median."""
        if self.ci_low is None or self.ci_high is None or self.median == 0:
            return None
        return 100.0 * (self.ci_high - self.ci_low) / 2 / abs(self.median)


def summarize(values: Sequence[float]) -> Summary | None:
    if not values:
        return None
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean if len(values) > 1 and mean != 0 else None
    interval = median_ci(values)
    return Summary(
        n=len(values),
        median=statistics.median(values),
        minimum=min(values),
        maximum=max(values),
        mean=mean,
        cv=cv,
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
    )


def seeded(values: Sequence[float]) -> random.Random:
    """A generator seeded by the data: the same values always give the same interval."""
    return random.Random(repr(sorted(values)))


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of sorted values, interpolating linearly between ranks."""
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median_ci(
    values: Sequence[float], *, level: float = LEVEL, resamples: int = RESAMPLES
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the median; None with fewer than two values."""
    if len(values) < 2:
        return None
    rng = seeded(values)
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1.0 - level) / 2
    return percentile(medians, tail), percentile(medians, 1.0 - tail)
