"""Descriptive statistics of repeated measurements, and the median's bootstrap interval.

The interval is a percentile bootstrap: resample the values with replacement, take each
resample's median, and read the 2.5th and 97.5th percentiles of those medians. The random
generator is seeded from the values themselves, so a report rendered twice from the same
store shows the same interval. With few values the interval is necessarily wide (with 3
values it spans almost their whole range): that is the honest answer, not a defect.

:func:`consistency` puts the coefficient of variation into words. Its thresholds follow
what this tool measures: a link-bound result (a shaped WAN) varies by less than 0.1% from
run to run, so "very consistent" (< 1%) is what a healthy link-bound measurement looks
like; a CPU-bound one (a userspace tunnel) varies by about 10%, the boundary between
"variable" and "inconsistent", where the median of a handful of runs needs more of them.
"""

import hashlib
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # numpy is imported where an interval is computed: the guest of a VM run (which
    # imports this module but computes none) pays about a second for it under emulation.
    import numpy as np

RESAMPLES = 4000
LEVEL = 0.95
#: (upper bound of the coefficient of variation, label), checked in order; see consistency().
CONSISTENCY = ((0.01, "very consistent"), (0.05, "consistent"), (0.10, "variable"))
INCONSISTENT = "inconsistent"


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    minimum: float
    maximum: float
    mean: float
    cv: float | None  # coefficient of variation (sample stdev / mean); None for n < 2
    values: tuple[float, ...] = field(default=(), repr=False, compare=False)

    @cached_property
    def ci(self) -> tuple[float, float] | None:
        """Bootstrap 95% interval of the median; None for n < 2. Computed when asked."""
        return median_ci(self.values)

    @property
    def ci_low(self) -> float | None:
        return self.ci[0] if self.ci else None

    @property
    def ci_high(self) -> float | None:
        return self.ci[1] if self.ci else None

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
    return Summary(
        n=len(values),
        median=statistics.median(values),
        minimum=min(values),
        maximum=max(values),
        mean=mean,
        cv=cv,
        values=tuple(values),
    )


def seeded(values: Sequence[float]) -> "np.random.Generator":
    """A generator seeded by the data: the same values always give the same interval."""
    import numpy as np

    digest = hashlib.sha256(repr(sorted(values)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def median_ci(
    values: Sequence[float], *, level: float = LEVEL, resamples: int = RESAMPLES
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the median; None with fewer than two values."""
    if len(values) < 2:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    picks = seeded(values).integers(0, len(data), size=(resamples, len(data)))
    medians = np.median(data[picks], axis=1)
    tail = (1.0 - level) / 2
    low, high = np.quantile(medians, [tail, 1.0 - tail])
    return float(low), float(high)


def consistency(summary: Summary) -> str:
    """The spread of the runs in words: ``single run`` (n = 1), ``very consistent``
    (CV < 1%), ``consistent`` (< 5%), ``variable`` (< 10%), ``inconsistent`` (>= 10%);
    ``n/a`` when the CV is undefined (a mean of 0)."""
    if summary.n == 1:
        return "single run"
    if summary.cv is None:
        return "n/a"
    for bound, label in CONSISTENCY:
        if abs(summary.cv) < bound:
            return label
    return INCONSISTENT
