"""Spearman's rank correlation of our rows with the paper's, with a percentile bootstrap interval from resampling rows."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats as st

from ablate.table.score_kinds import finite


def spearman_with_interval(
    ours: Sequence[float | None], paper: Sequence[float | None], n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float | None, float | None, float | None]:
    """Spearman's rho of our rows vs the paper's, with a percentile bootstrap interval from resampling rows.

    Rows missing on either side are dropped; fewer than 3 left (or constant ranks) gives (None, None, None).
    Resamples with constant ranks have no rho and are left out of the interval.
    """
    pairs = [(o, p) for o, p in zip(ours, paper, strict=True) if finite(o) and finite(p)]
    if len(pairs) < 3:
        return None, None, None
    x, y = np.array(pairs, dtype=float).T
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        rho = float(st.spearmanr(x, y).statistic)
        idx = np.random.default_rng(seed).integers(len(x), size=(n_boot, len(x)))
        boot = _rowwise_pearson(st.rankdata(x[idx], axis=1), st.rankdata(y[idx], axis=1))
    boot = boot[np.isfinite(boot)]
    if math.isnan(rho) or boot.size == 0:
        return None, None, None
    low, high = np.percentile(boot, [50 * (1 - level), 50 * (1 + level)])
    return rho, float(low), float(high)


def _rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row pair: Spearman on ranks, for all resamples at once."""
    a, b = a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True)
    return np.clip((a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1)), -1.0, 1.0)
