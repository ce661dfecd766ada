"""Spearman's rank correlation with the paper and its bootstrap interval (ablate.table.rank_correlation), against scipy."""

import numpy as np
import pytest
from scipy import stats as st

from ablate.table.rank_correlation import spearman_with_interval


def test_spearman_perfect_ranks():
    rho, low, high = spearman_with_interval([1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 20.0, 25.0, 40.0, 41.0])
    assert rho == pytest.approx(1.0) and low == pytest.approx(1.0) and high == pytest.approx(1.0)


def test_spearman_matches_scipy_and_interval_contains_it():
    rng = np.random.default_rng(9)
    paper = rng.normal(size=12)
    ours = paper + rng.normal(scale=0.7, size=12)
    rho, low, high = spearman_with_interval(ours, paper)
    assert rho == pytest.approx(st.spearmanr(ours, paper).statistic)
    assert -1 <= low < rho < high <= 1
    assert spearman_with_interval(ours, paper, seed=1) != (rho, low, high)


def test_spearman_drops_missing_rows_and_needs_three():
    assert spearman_with_interval([1.0, 2.0], [1.0, 2.0]) == (None, None, None)
    assert spearman_with_interval([1.0, 2.0, 3.0, 4.0], [1.0, None, 3.0, float("nan")]) == (None, None, None)
    rho, _, _ = spearman_with_interval([1.0, 2.0, 3.0, 9.0], [1.0, None, 3.0, 2.0])
    assert rho == pytest.approx(st.spearmanr([1, 3, 9], [1, 3, 2]).statistic)
    assert spearman_with_interval([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) == (None, None, None)


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8])
@pytest.mark.parametrize("rows", [8, 12])
def test_spearman_interval_covers_the_true_rank_correlation(rho, rows):
    """A percentile bootstrap over a dozen rows could under-cover; it does not here. Rows drawn as bivariate normal
    pairs with correlation rho, whose rank correlation is (6/pi) asin(rho/2): the 95% interval holds it in at least
    92% of 200 studies (checked to fail for an 80% interval)."""
    rng = np.random.default_rng(3)
    truth, held = 6 / np.pi * np.arcsin(rho / 2), 0
    for i in range(200):
        ours, paper = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=rows).T
        _, low, high = spearman_with_interval(ours, paper, n_boot=500, seed=i)
        held += low <= truth <= high
    assert held / 200 >= 0.92
