"""Intervals over seeds: a row's mean with its Student-t interval (cut at the score's range, ablate.table.score_kinds),
and the difference of two rows' seed means with a Welch interval, since an ablation may change the seed variance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as st


@dataclass(frozen=True)
class Interval:
    """Mean over seeds with its Student-t interval; low, high and sd are None for one seed (no spread to estimate),
    low and high also where every seed scored the same (sd 0); clipped: the interval was cut at the score's range."""

    mean: float
    low: float | None
    high: float | None
    n: int
    sd: float | None
    clipped: bool = False


@dataclass(frozen=True)
class Difference:
    """Difference of two rows' seed means (row - base) with a Welch interval; None bounds when a row has one seed or
    neither row's seeds vary (se 0: no interval, not an exact one)."""

    delta: float
    low: float | None
    high: float | None
    df: float | None
    se: float | None


def t_interval(values: Sequence[float], level: float = 0.95, bounds: tuple[float, float] = (-math.inf, math.inf)) -> Interval:
    """Mean and Student-t interval over seeds: with 3-5 seeds the normal quantile would be far too narrow.

    The interval is cut to `bounds`, the score's range (a Metric's `bounds`), and says so: the true mean lies in the range, so
    cutting loses no coverage, while a percentile bootstrap over 3-5 seeds has too few distinct resamples to replace
    the t. Seeds that all score the same give no bounds: an sd of 0 from a few seeds is no interval of width 0.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("t_interval needs at least one value")
    mean = float(x.mean())
    if x.size == 1:
        return Interval(mean, None, None, 1, None)
    sd = float(x.std(ddof=1))
    if sd == 0.0:
        return Interval(mean, None, None, int(x.size), 0.0)
    half = float(st.t.ppf((1 + level) / 2, x.size - 1)) * sd / math.sqrt(x.size)
    low, high = max(mean - half, bounds[0]), min(mean + half, bounds[1])
    return Interval(mean, low, high, int(x.size), sd, (low, high) != (mean - half, mean + half))


def welch_interval(row: Sequence[float], base: Sequence[float], level: float = 0.95) -> Difference:
    """Interval of mean(row) - mean(base) over seeds; Welch, since an ablation may change the seed variance too.
    Not cut to a range: a difference may be negative."""
    a, b = np.asarray(row, dtype=float), np.asarray(base, dtype=float)
    delta = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return Difference(delta, None, None, None, None)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0.0:  # no spread in either row: nothing to put an interval on (a few seeds alike are not an exact value)
        return Difference(delta, None, None, None, 0.0)
    df = float((va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)))  # Welch-Satterthwaite
    half = float(st.t.ppf((1 + level) / 2, df)) * se
    return Difference(delta, delta - half, delta + half, df, se)
