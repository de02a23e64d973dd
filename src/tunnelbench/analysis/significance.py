"""Is B really faster than A? A rank test and the ratio of medians with its interval.

Benchmark repetitions are few (3 to 10) and not normally distributed (a CPU-bound tunnel
has occasional slow runs), so the test is the two-sided Mann-Whitney U (Wilcoxon rank
sum) test, which assumes neither. Its p-value is exact whenever that is affordable:

- no tied values and at most ``EXACT_MAX_N`` values in all: the null distribution of
  the rank sum is counted exactly (``method="exact"``);
- tied values (mid-ranks) and at most ``PERMUTATION_MAX`` ways to split the values into
  the two groups: every split is counted (``method="permutation"``);
- otherwise the normal approximation with the tie and continuity corrections
  (``method="normal"``), which is accurate at those sizes.

Both exact methods count the same thing, how many of the C(n1+n2, n1) equally likely
splits give a rank sum as extreme as the observed one, by dynamic programming over the
(doubled, hence whole) mid-ranks instead of listing the splits. The two-sided p-value is
twice the smaller tail, capped at 1 (as scipy's ``mannwhitneyu``/``permutation_test``).

A rank test has a floor: with n1 and n2 values the smallest possible two-sided p is
2 / C(n1+n2, n1). With 3 runs on each side that is 2/20 = 0.1, so no difference, however
large, can be significant at the 5% level; the verdict says so rather than "no
difference". 4 runs on each side (2/70 = 0.029) is the least that can.

A p-value at or above alpha is not evidence of equality: it says the runs did not decide.
The verdict is then "not decided", with the change and its interval; only a caller that
has an equivalence margin (``compare``: this machine's noise) may call a difference whose
whole interval lies within it "no difference" (:meth:`Comparison.within`).

A change of more than +100% reads as a factor (times 545, not ``+54,366%``): :func:`by`.

The size of a difference is the ratio of medians B/A with a percentile-bootstrap 95%
interval (each group resampled on its own, seeded from the data so that a report is
reproducible), the same construction as the median's interval in :mod:`.stats`.
"""

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from tunnelbench.analysis.stats import LEVEL, RESAMPLES, seeded

if TYPE_CHECKING:
    # numpy is imported where arrays are computed, as in .stats: every command imports
    # this module (0.18 s of numpy at each start), few compute a test.
    import numpy as np

#: Significance level of the verdicts: p < ALPHA is called a difference.
ALPHA = 0.05
#: A ratio above this reads as a factor: "times 545" says what "by 54,366%" hides.
FACTOR_ABOVE = 2.0
#: The multiplication sign a factor is written with.
TIMES = "\u00d7"
EXACT_MAX_N = 40
PERMUTATION_MAX = 200_000

Method = Literal["exact", "permutation", "normal"]


class Change(StrEnum):
    """What a comparison shows of B against A: faster or slower (significantly), no
    difference, or undecidable (samples too small for any outcome to be significant)."""

    FASTER = "faster"
    SLOWER = "slower"
    NONE = "none"
    UNDECIDABLE = "undecidable"


@dataclass(frozen=True)
class RankTest:
    """A two-sided Mann-Whitney U test of group A against group B."""

    u: float  # U of group A: how many (a, b) pairs have a > b, ties counting 1/2
    p: float
    method: Method


@dataclass(frozen=True)
class Comparison:
    """Group B against group A (e.g. the goodput of B's runs against A's)."""

    n1: int  # values in A
    n2: int  # values in B
    ratio: float | None  # median(B) / median(A); None when median(A) is 0
    ratio_ci: tuple[float, float] | None  # bootstrap 95% interval; None with < 2 values a side
    p: float
    method: Method

    @property
    def smallest_p(self) -> float:
        return smallest_p(self.n1, self.n2)

    @property
    def can_be_significant(self) -> bool:
        """Whether any outcome of these sample sizes could reach p < ALPHA."""
        return self.smallest_p < ALPHA

    @property
    def significant(self) -> bool:
        return self.p < ALPHA

    @property
    def direction(self) -> Change:
        if not self.can_be_significant:
            return Change.UNDECIDABLE
        if not self.significant or self.ratio is None or self.ratio == 1:
            return Change.NONE
        return Change.FASTER if self.ratio > 1 else Change.SLOWER

    def within(self, margin_pct: float) -> bool:
        """Whether the whole 95% interval of B/A lies within ± ``margin_pct`` percent of
        1: the runs show the difference is smaller than the margin (an equivalence)."""
        if self.ratio_ci is None:
            return False
        low, high = self.ratio_ci
        return 1 - margin_pct / 100 <= low and high <= 1 + margin_pct / 100

    @property
    def verdict(self) -> str:
        """One plain sentence: B is faster / slower by how much, or not decided."""
        p = format_p(self.p)
        if self.direction is Change.UNDECIDABLE:
            return (
                f"cannot tell with {self.n1} and {self.n2} runs: no difference can reach "
                f"p < {ALPHA:g} (smallest possible {format_p(self.smallest_p)}); "
                f"run at least {repetitions_needed()} repetitions"
            )
        if self.direction is Change.NONE or self.ratio is None:
            return f"not decided ({self.change_text()}{p})"
        if self.ratio > FACTOR_ABOVE:
            ci = ""
            if self.ratio_ci is not None:
                ci = f"95% CI {factor(self.ratio_ci[0])}..{factor(self.ratio_ci[1])}, "
            return f"B is {self.direction} {factor(self.ratio)} ({ci}{p})"
        # Slower by 1 - ratio: the interval's ends swap when turned into a slowdown.
        sign = 1 if self.direction is Change.FASTER else -1
        change = sign * (self.ratio - 1)
        ci = ""
        if self.ratio_ci is not None:
            ends = sorted(sign * (end - 1) for end in self.ratio_ci)
            ci = f"95% CI {ends[0]:.1%}..{ends[1]:.1%}, "
        return f"B is {self.direction} by {change:.1%} ({ci}{p})"

    def change_text(self) -> str:
        """``-10.0%, 95% CI -17.0%..+1.0%, ``: the signed change of the medians and its
        interval, for a verdict that decides nothing; empty without a ratio."""
        if self.ratio is None:
            return ""
        if self.ratio_ci is None:
            return f"{self.ratio - 1:+.1%}, "
        low, high = (end - 1 for end in self.ratio_ci)
        return f"{self.ratio - 1:+.1%}, 95% CI {low:+.1%}..{high:+.1%}, "


def factor(ratio: float) -> str:
    """A ratio to three significant digits after :data:`TIMES`: 545, 12.3, 2.35."""
    if ratio >= 100:
        return f"{TIMES} {ratio:,.0f}"
    return f"{TIMES} {ratio:.1f}" if ratio >= 10 else f"{TIMES} {ratio:.2f}"


def by(ratio: float, decimals: int = 1) -> str:
    """The size of a change as a verdict says it: ``by 10.0%`` (up or down), or above
    :data:`FACTOR_ABOVE` the factor (:func:`factor`)."""
    if ratio > FACTOR_ABOVE:
        return factor(ratio)
    return f"by {abs(ratio - 1):.{decimals}%}"


def p_text(p: float) -> str:
    """A p-value to two significant digits; below 0.001 only its bound."""
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


def format_p(p: float) -> str:
    """``p = 0.056``, or ``p < 0.001``."""
    text = p_text(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def smallest_p(n1: int, n2: int) -> float:
    """The smallest two-sided p a rank test can give with these sizes (no ties): the
    most extreme split is 1 of the C(n1+n2, n1) equally likely ones, in either tail."""
    if n1 == 0 or n2 == 0:
        return 1.0
    return min(1.0, 2 / math.comb(n1 + n2, n1))


def repetitions_needed(alpha: float = ALPHA) -> int:
    """The fewest runs per side for which a rank test can reach p < alpha (4 at 5%)."""
    n = 1
    while smallest_p(n, n) >= alpha:
        n += 1
    return n


def mid_ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n; tied values share the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start : end + 1]:
            ranks[i] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _rank_sum_counts(doubled: Sequence[int], n1: int) -> "np.ndarray":
    """How many n1-element subsets of ``doubled`` (twice the mid-ranks, whole numbers)
    have each sum: a 0/1 knapsack count, row k = subsets of size k."""
    import numpy as np

    counts = np.zeros((n1 + 1, sum(doubled) + 1), dtype=np.int64)
    counts[0, 0] = 1
    for value in doubled:
        # The right-hand side is read before the in-place add (numpy copies overlapping
        # operands), so each value is used at most once per subset.
        counts[1:, value:] += counts[:-1, : counts.shape[1] - value]
    row: np.ndarray = counts[n1]
    return row


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> RankTest:
    """Two-sided Mann-Whitney U test; see the module docstring for the method chosen."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("mann_whitney needs at least one value in each group")
    ranks = mid_ranks([*a, *b])
    rank_sum = sum(ranks[:n1])
    u = rank_sum - n1 * (n1 + 1) / 2
    n = n1 + n2
    ties = len(set(ranks)) < n
    if (not ties and n <= EXACT_MAX_N) or (ties and math.comb(n, n1) <= PERMUTATION_MAX):
        doubled = [round(2 * r) for r in ranks]
        dist = _rank_sum_counts(doubled, n1)
        observed = round(2 * rank_sum)
        total = math.comb(n, n1)
        low, high = int(dist[: observed + 1].sum()), int(dist[observed:].sum())
        p = min(1.0, 2 * min(low, high) / total)
        return RankTest(u, p, "exact" if not ties else "permutation")
    return RankTest(u, _normal_p(u, n1, n2, ranks), "normal")


def _normal_p(u: float, n1: int, n2: int, ranks: Sequence[float]) -> float:
    """Normal approximation of U with the tie correction of its variance and a
    continuity correction of 1/2 toward the mean."""
    n = n1 + n2
    tie_sizes = [ranks.count(r) for r in set(ranks)]
    tie_term = sum(t**3 - t for t in tie_sizes) / (n * (n - 1))
    variance = n1 * n2 / 12 * ((n + 1) - tie_term)
    if variance <= 0:  # every value equal: no evidence of any difference
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))  # 2 * P(Z > z)


def ratio_of_medians_ci(
    a: Sequence[float], b: Sequence[float], *, level: float = LEVEL, resamples: int = RESAMPLES
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of median(B) / median(A), each group resampled on
    its own; None when a group has fewer than two values or A's medians can be 0."""
    if len(a) < 2 or len(b) < 2 or min(a) <= 0:
        return None
    import numpy as np

    rng = seeded([*a, *b])
    data_a, data_b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    med_a = np.median(data_a[rng.integers(0, len(a), size=(resamples, len(a)))], axis=1)
    med_b = np.median(data_b[rng.integers(0, len(b), size=(resamples, len(b)))], axis=1)
    tail = (1.0 - level) / 2
    low, high = np.quantile(med_b / med_a, [tail, 1.0 - tail])
    return float(low), float(high)


def compare(a: Sequence[float], b: Sequence[float]) -> Comparison:
    """B's values against A's: ratio of medians, its interval and the rank test."""
    test = mann_whitney(a, b)
    median_a, median_b = float(statistics.median(a)), float(statistics.median(b))
    return Comparison(
        n1=len(a),
        n2=len(b),
        ratio=median_b / median_a if median_a != 0 else None,
        ratio_ci=ratio_of_medians_ci(a, b),
        p=test.p,
        method=test.method,
    )
