"""Seed intervals (ablate.table.seed_intervals) against hand-computed values and scipy."""

import math
import statistics

import numpy as np
import pytest
from scipy import stats as st

from ablate.table.score_kinds import SCORES
from ablate.table.seed_intervals import Interval, t_interval, welch_interval


def test_t_interval_matches_hand_value():
    iv = t_interval([1, 2, 3, 4, 5])
    half = 2.7764451051977987 * math.sqrt(2.5) / math.sqrt(5)  # t_{0.975, 4} * sd / sqrt(n)
    assert (iv.mean, iv.n) == (3.0, 5)
    assert iv.sd == pytest.approx(math.sqrt(2.5))
    assert (iv.low, iv.high) == pytest.approx((3 - half, 3 + half))


def test_t_interval_level_matches_scipy():
    values = [27.1, 26.4, 27.9, 26.8]
    iv = t_interval(values, level=0.9)
    low, high = st.t.interval(0.9, len(values) - 1, loc=np.mean(values), scale=st.sem(values))
    assert (iv.low, iv.high) == pytest.approx((low, high))


def test_t_interval_one_seed_has_no_spread():
    assert t_interval([25.3]) == Interval(25.3, None, None, 1, None)
    with pytest.raises(ValueError):
        t_interval([])


def test_welch_interval_matches_scipy():
    row, base = [25.1, 25.9, 26.3, 24.8, 25.5], [24.0, 24.2, 23.1]
    diff = welch_interval(row, base)
    ci = st.ttest_ind(row, base, equal_var=False).confidence_interval(0.95)
    assert diff.delta == pytest.approx(np.mean(row) - np.mean(base))
    assert (diff.low, diff.high) == pytest.approx((ci.low, ci.high))
    va, vb = np.var(row, ddof=1) / 5, np.var(base, ddof=1) / 3
    assert diff.df == pytest.approx((va + vb) ** 2 / (va**2 / 4 + vb**2 / 2))
    assert diff.se == pytest.approx(math.sqrt(va + vb))


def test_welch_interval_needs_two_seeds_per_row():
    diff = welch_interval([25.0], [24.0, 24.5])
    assert diff.delta == pytest.approx(0.75)
    assert (diff.low, diff.high, diff.df, diff.se) == (None, None, None, None)
    alike = welch_interval([2.0, 2.0], [1.0, 1.0])  # seeds that all score alike: no interval, not a width-0 one
    assert (alike.delta, alike.low, alike.high, alike.df, alike.se) == (1.0, None, None, None, 0.0)


def test_t_interval_is_cut_at_the_scores_range_and_says_so():
    """BLEU of 0.5, 0.2 and 4.0: t(2) * sd / sqrt(3) = 5.24 around 1.57 reaches -3.67, cut at 0; the top is not cut."""
    half = st.t.ppf(0.975, 2) * statistics.stdev([0.5, 0.2, 4.0]) / math.sqrt(3)
    cut = t_interval([0.5, 0.2, 4.0], bounds=SCORES["bleu"].bounds)
    assert (cut.low, cut.high, cut.clipped) == (0.0, pytest.approx(1.5667 + half, abs=1e-4), True)
    assert t_interval([0.5, 0.2, 4.0]).low == pytest.approx(1.5667 - half, abs=1e-4)  # unbounded: as t gives it
    assert t_interval([99.0, 99.5, 97.0], bounds=SCORES["bleu"].bounds).high == 100.0 and not t_interval([30.0, 31.0]).clipped
    assert t_interval([0.0, 0.0, 0.0], bounds=SCORES["bleu"].bounds) == Interval(0.0, None, None, 3, 0.0)  # all alike: no interval
