"""The rank test and the ratio of medians: known p-values, and behaviour on known
distributions.

Reference p-values were computed once with scipy 1.17.1 in a throwaway venv
(``python3 -m venv /tmp/scipy && /tmp/scipy/bin/pip install scipy``):
``scipy.stats.mannwhitneyu(a, b, method="exact")`` for the cases without ties,
``scipy.stats.permutation_test((a, b), <sum of a's mid-ranks in rankdata(a + b)>,
permutation_type="independent", n_resamples=np.inf)`` for the cases with ties, and
``mannwhitneyu(a, b, method="asymptotic")`` (continuity and tie corrections) for the
normal approximation. They are hard-coded here; scipy is not a dependency.
"""

import math
import random

import pytest

from tunnelbench.analysis.significance import (
    ALPHA,
    Change,
    Comparison,
    by,
    compare,
    format_p,
    mann_whitney,
    mid_ranks,
    ratio_of_medians_ci,
    repetitions_needed,
    smallest_p,
)
from tunnelbench.analysis.stats import consistency, summarize

# Rounded normal draws (numpy default_rng(1), N(10, 2) and N(11, 2)), 30 vs 30 with many
# ties: C(60, 30) ~ 1.2e17 splits, so the normal approximation.
# fmt: off
TIES_30_A: list[float] = [11, 12, 11, 7, 12, 11, 9, 11, 11, 11, 10, 11, 9, 10, 9,
                          11, 10, 9, 8, 9, 10, 9, 13, 12, 5, 6, 10, 9, 10, 10]
TIES_30_B: list[float] = [15, 9, 10, 15, 12, 12, 10, 8, 11, 11, 9, 10, 11, 9, 11,
                          11, 11, 10, 12, 13, 12, 9, 12, 10, 13, 9, 13, 11, 9, 10]
# fmt: on

# (a, b, method, scipy's p-value)
KNOWN: dict[str, tuple[list[float], list[float], str, float]] = {
    # Completely separated 3 vs 3: 1 of C(6,3) = 20 splits in each tail, p = 2/20.
    "three_vs_three_apart": ([1, 2, 3], [4, 5, 6], "exact", 0.1),
    # 3 vs 4 apart: 2/C(7,3) = 2/35 = 0.0571, still not below 0.05.
    "three_vs_four_apart": ([1, 2, 3], [4, 5, 6, 7], "exact", 0.05714285714285714),
    # The example of scipy's mannwhitneyu documentation (U1 = 17).
    "scipy_doc_males_females": ([19, 22, 16, 29, 24], [20, 11, 17, 12], "exact", 1 / 9),
    # Goodput-like values, 5 runs each, no ties.
    "goodput_5_vs_5": (
        [2366.0, 2344.0, 2388.0, 2401.0, 2350.0],
        [2410.0, 2395.0, 2432.0, 2420.0, 2371.0],
        "exact",
        0.05555555555555555,
    ),
    # Perfectly interleaved: U = n1 n2 / 2, p = 1.
    "interleaved_4_vs_4": ([1, 4, 5, 8], [2, 3, 6, 7], "exact", 1.0),
    # 20 vs 20 shifted by 10.5: the largest exact size (40 values).
    "shifted_20_vs_20": (
        [float(i) for i in range(1, 21)],
        [i + 10.5 for i in range(1, 21)],
        "exact",
        6.91365976465362e-06,
    ),
    # Hollander & Wolfe's depression scores taken as two samples: two pairs of ties,
    # C(18, 9) = 48,620 splits, counted exactly.
    "hollander_wolfe_ties": (
        [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30],
        [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29],
        "permutation",
        0.12990538872891813,
    ),
    # Ties across the groups (2 thrice, 3 twice, 4 twice).
    "small_ties": ([1, 2, 2, 3], [2, 3, 4, 4, 5], "permutation", 0.1111111111111111),
    # Every value equal: no evidence of anything.
    "identical": ([5.0, 5.0, 5.0], [5.0, 5.0, 5.0], "permutation", 1.0),
    # 30 vs 30 with many ties (above): the normal approximation.
    "normal_ties_30": (TIES_30_A, TIES_30_B, "normal", 0.059477707028941916),
    # 26 vs 25 without ties: more than 40 values, so the normal approximation.
    "normal_no_ties_51": (
        [float(v) for v in range(1, 50, 2)] + [0.5],
        [float(v) for v in range(2, 52, 2)],
        "normal",
        0.6443433740263971,
    ),
}


@pytest.mark.parametrize("name", KNOWN)
def test_p_values_match_scipy(name):
    a, b, method, expected = KNOWN[name]
    test = mann_whitney(a, b)
    assert test.method == method
    assert test.p == pytest.approx(expected, rel=1e-9)
    # The test is symmetric: swapping the groups changes U to n1 n2 - U, not p.
    swapped = mann_whitney(b, a)
    assert swapped.p == pytest.approx(expected, rel=1e-9)
    assert test.u + swapped.u == len(a) * len(b)


def test_u_counts_pairs_where_a_is_larger():
    # scipy's example: U1 = 17 of the 5 x 4 = 20 pairs (a tie would count 1/2).
    assert mann_whitney([19, 22, 16, 29, 24], [20, 11, 17, 12]).u == 17.0
    # a = [1, 2, 2, 3] against b = [2, 3, 4, 4, 5]: 1 beats nothing; each 2 ties one 2
    # (1/2 each); 3 beats the 2 and ties the 3: 0 + 0.5 + 0.5 + 1.5 = 2.5.
    assert mann_whitney([1, 2, 2, 3], [2, 3, 4, 4, 5]).u == 2.5


def test_mid_ranks():
    # sorted: 1 (rank 1), 2 2 2 (ranks 2..4 -> 3), 3 3 (5, 6 -> 5.5), 4 4 (7, 8 -> 7.5), 5 (9)
    assert mid_ranks([1, 2, 2, 3, 2, 3, 4, 4, 5]) == [1, 3, 3, 5.5, 3, 5.5, 7.5, 7.5, 9]


def test_smallest_possible_p_and_the_repetitions_it_takes():
    assert smallest_p(3, 3) == pytest.approx(0.1)  # 2 / C(6, 3) = 2 / 20
    assert smallest_p(3, 4) == pytest.approx(2 / 35)  # C(7, 3) = 35: 0.057, not < 0.05
    assert smallest_p(4, 4) == pytest.approx(2 / 70)  # C(8, 4) = 70: 0.029
    assert smallest_p(1, 1) == 1.0  # 2 / C(2, 1) = 1
    assert repetitions_needed() == 4
    assert repetitions_needed(0.01) == 5  # 2 / C(10, 5) = 2 / 252 = 0.0079


def test_three_runs_each_can_never_be_significant_and_the_verdict_says_so():
    # Even a 2x difference: 3 vs 3 completely separated is p = 0.1.
    result = compare([100.0, 101.0, 102.0], [200.0, 201.0, 202.0])
    assert result.p == pytest.approx(0.1)
    assert not result.can_be_significant and result.direction is Change.UNDECIDABLE
    assert result.verdict == (
        "cannot tell with 3 and 3 runs: no difference can reach p < 0.05 "
        "(smallest possible p = 0.1); run at least 4 repetitions"
    )


def test_verdicts():
    a = [1000.0, 1010.0, 990.0, 1005.0, 995.0]
    b = [1100.0, 1111.0, 1089.0, 1105.0, 1095.0]
    faster = compare(a, b)
    # medians 1000 and 1100: ratio 1.1; completely separated 5 vs 5: p = 2 / C(10, 5) = 2/252
    assert faster.ratio == pytest.approx(1.1)
    assert faster.p == pytest.approx(2 / 252)
    assert faster.method == "exact" and (faster.n1, faster.n2) == (5, 5)
    low, high = faster.ratio_ci  # type: ignore[misc]
    # Every resampled median lies within each group's range: 1089/1010 .. 1111/990.
    assert 1089 / 1010 <= low < 1.1 < high <= 1111 / 990
    assert faster.verdict == (
        f"B is faster by 10.0% (95% CI {low - 1:.1%}..{high - 1:.1%}, p = 0.0079)"
    )
    slower = compare(b, a)
    assert slower.ratio == pytest.approx(1 / 1.1)  # 9.1% slower
    low, high = slower.ratio_ci  # type: ignore[misc]
    assert slower.verdict == (
        f"B is slower by 9.1% (95% CI {1 - high:.1%}..{1 - low:.1%}, p = 0.0079)"
    )
    # p = 1 is not evidence of equality: the interval says how far apart they may be.
    same = compare([1.0, 4.0, 5.0, 8.0], [2.0, 3.0, 6.0, 7.0])
    low, high = same.ratio_ci  # type: ignore[misc]
    assert same.verdict == f"not decided (+0.0%, 95% CI {low - 1:+.1%}..{high - 1:+.1%}, p = 1)"
    assert low < 0.5 and high > 2 and not same.within(10)
    identical = compare([5.0] * 4, [5.0] * 4)
    assert (identical.p, identical.ratio, identical.ratio_ci) == (1.0, 1.0, (1.0, 1.0))
    assert identical.verdict == "not decided (+0.0%, 95% CI +0.0%..+0.0%, p = 1)"
    assert identical.within(0.1)


def test_an_interval_that_reaches_past_the_margin_is_not_decided():
    # The tune session's case: -10%, 95% CI -17%..+1%, not significant at its level.
    c = Comparison(n1=5, n2=5, ratio=0.90, ratio_ci=(0.83, 1.01), p=0.029 * 2, method="exact")
    assert c.direction is Change.NONE
    assert c.verdict == "not decided (-10.0%, 95% CI -17.0%..+1.0%, p = 0.058)"
    assert not c.within(5) and not c.within(10) and c.within(17)


def test_a_change_beyond_twice_reads_as_a_factor():
    c = Comparison(n1=5, n2=5, ratio=544.66, ratio_ci=(400.2, 690.0), p=0.0079, method="exact")
    assert c.verdict == "B is faster \u00d7 545 (95% CI \u00d7 400..\u00d7 690, p = 0.0079)"
    assert by(544.66) == "\u00d7 545" and by(3.216) == "\u00d7 3.22" and by(12.34) == "\u00d7 12.3"
    # Up to +100% a change stays a percentage; a slowdown is always one (at most -100%).
    assert by(2.0) == "by 100.0%" and by(0.1, 0) == "by 90%"


def test_p_value_wording():
    assert format_p(0.0000069) == "p < 0.001"
    assert format_p(0.05555) == "p = 0.056"
    assert format_p(1.0) == "p = 1"


def test_ratio_interval_is_reproducible_and_needs_two_values_a_side():
    a, b = [10.0, 11.0, 12.0, 13.0], [20.0, 22.0, 21.0]
    assert ratio_of_medians_ci(a, b) == ratio_of_medians_ci(list(reversed(a)), b)
    assert ratio_of_medians_ci([10.0], b) is None
    assert ratio_of_medians_ci(a, [20.0]) is None
    assert compare([10.0], [20.0]).ratio_ci is None


def test_ratio_interval_covers_a_known_ten_percent_shift():
    # A ~ N(1000, 50), B ~ N(1100, 55): the ratio of the population medians is exactly
    # 1.10. 200 experiments of 10 runs each; a 95% interval should cover 1.10 in about
    # 95% of them. The percentile bootstrap of a median from 10 values covers a little
    # less than nominal, so require >= 88% (176 of 200).
    rng = random.Random(11)
    covered = 0
    for _ in range(200):
        a = [rng.gauss(1000.0, 50.0) for _ in range(10)]
        b = [rng.gauss(1100.0, 55.0) for _ in range(10)]
        low, high = ratio_of_medians_ci(a, b, resamples=1000)  # type: ignore[misc]
        covered += low <= 1.10 <= high
    assert covered >= 176, covered


def test_identical_distributions_are_called_different_about_5_percent_of_the_time():
    # 400 experiments, 8 vs 8 from the same N(1000, 50). The exact test at 8 vs 8 can
    # only reach p-values on a grid, so its false-positive rate is at most 5%
    # (about 4.9%): expect ~20 of 400; binomial 3-sigma band: 20 +- 13.
    rng = random.Random(5)
    positives = 0
    for _ in range(400):
        a = [rng.gauss(1000.0, 50.0) for _ in range(8)]
        b = [rng.gauss(1000.0, 50.0) for _ in range(8)]
        positives += mann_whitney(a, b).p < ALPHA
    assert 7 <= positives <= 33, positives


def test_a_ten_percent_shift_is_detected_with_enough_runs():
    # N(1000, 50) vs N(1100, 55): the shift is 2 standard deviations; with 8 runs each
    # the test's power is about 95%, so at least 85% of 200 experiments must find it.
    rng = random.Random(3)
    found = 0
    for _ in range(200):
        a = [rng.gauss(1000.0, 50.0) for _ in range(8)]
        b = [rng.gauss(1100.0, 55.0) for _ in range(8)]
        found += compare(a, b).direction is Change.FASTER
    assert found >= 170, found


def test_exact_counts_agree_with_listing_every_split():
    # For a small case with ties, list all C(7, 3) = 35 splits by hand and count.
    import itertools

    a, b = [3.0, 1.0, 4.0], [1.0, 5.0, 9.0, 2.0]
    ranks = mid_ranks(a + b)
    observed = sum(ranks[:3])
    sums = [sum(ranks[i] for i in split) for split in itertools.combinations(range(7), 3)]
    low = sum(s <= observed for s in sums)
    high = sum(s >= observed for s in sums)
    assert mann_whitney(a, b).p == pytest.approx(min(1.0, 2 * min(low, high) / math.comb(7, 3)))


def test_consistency_labels():
    # CV = sample stdev / mean. [100, 100.1, 99.9]: stdev 0.1, CV 0.1% -> very consistent.
    assert consistency(summarize([100.0, 100.1, 99.9])) == "very consistent"  # type: ignore[arg-type]
    # [100, 103, 97]: stdev 3, CV 3% -> consistent.
    assert consistency(summarize([100.0, 103.0, 97.0])) == "consistent"  # type: ignore[arg-type]
    # [100, 108, 92]: stdev 8, CV 8% -> variable.
    assert consistency(summarize([100.0, 108.0, 92.0])) == "variable"  # type: ignore[arg-type]
    # [100, 110, 90]: stdev 10, CV 10% -> inconsistent (the bound is exclusive).
    assert consistency(summarize([100.0, 110.0, 90.0])) == "inconsistent"  # type: ignore[arg-type]
    assert consistency(summarize([42.0])) == "single run"  # type: ignore[arg-type]
    assert consistency(summarize([0.0, 0.0])) == "n/a"  # type: ignore[arg-type]
