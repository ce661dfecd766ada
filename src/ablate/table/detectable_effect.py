"""The minimum detectable effect (MDE) of a paired test, and the seeds a row would need for a target MDE at the noise
a test measured (ablate.table.paired_bootstrap.Noise): a plan for the next study.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as st
from scipy.optimize import brentq

from ablate.table.paired_bootstrap import Noise


def mde(se: float | None, alpha: float = 0.05, m: int = 1, power: float = 0.8, df: float = math.inf) -> float | None:
    """Minimum detectable effect: the smallest |Δ| found with probability `power` by a two-sided test at alpha/m.

    Solved exactly: Δ/SE is noncentral t with `df` degrees of freedom (normal at df = inf), and the MDE is the
    noncentrality whose two-sided rejection rate at t_{df, 1 - alpha/(2m)} is `power`, times SE. The textbook
    (t_{1 - alpha/(2m)} + t_{power}) * SE promises that power only at many df: at the 2-5 df of a few seeds it has
    68-75% (against 80%) over Table 3's 11 rows, 77-80% for one row: its MDE is 6-19% too small there (1-5% for one
    row; about 1% at 30 df). SE and df are the paired test's (`PairedTest`); alpha/m
    is Holm's strictest step (Bonferroni), so the MDE is conservative for every row Holm ranks later.
    """
    if se is None:
        return None
    crit = float(st.t.ppf(1 - alpha / (2 * m), df))
    if math.isinf(df):

        def rejected(nc: float) -> float:
            return float(st.norm.sf(crit - nc) + st.norm.cdf(-crit - nc))
    else:

        def rejected(nc: float) -> float:  # the lower tail as the upper of -nc: nct.cdf there can give NaN
            return float(st.nct.sf(crit, df, nc) + st.nct.sf(crit, df, -nc))

    guess = crit + float(st.t.ppf(power, df))  # the textbook's, too small: the root lies above it
    high = 2 * guess
    while rejected(high) < power:
        high *= 2
    return float(brentq(lambda nc: rejected(nc) - power, 0.0, high, xtol=1e-10)) * se


MOST_SEEDS = 100  # a plan needing more says "more than MOST_SEEDS"


@dataclass(frozen=True)
class SeedPlan:
    """How many seeds a row (and the base, where it has fewer) would need for an MDE of `target`.

    seeds: None when more than the largest number tried; floor: the MDE with unlimited seeds, what the evaluation
    set's sentences alone allow (a target below it needs more sentences, not seeds)."""

    target: float
    seeds: int | None
    floor: float


def seeds_for_mde(noise: Noise, target: float, alpha: float = 0.05, m: int = 1, power: float = 0.8, most: int = MOST_SEEDS) -> SeedPlan:
    """The fewest seeds n per row (the base keeping more if it has them) whose test would have MDE <= target, at the
    noise this test measured: a plan for the next study, as rough as the few seeds the variances come from."""
    floor = mde(math.sqrt(noise.sentences), alpha, m, power)

    def enough(n: int) -> bool:
        var, df = noise.at(n, max(n, noise.n_base))
        return mde(math.sqrt(var), alpha, m, power, df) <= target

    # Below the base's own seeds a row's added seed can cost the test more df than it saves variance, so those are
    # counted up; from there both sides gain seeds, which only narrows the test (a smaller Var(Δ), more df), so the
    # fewest that do is found by bisection: 7 MDEs where counting up took up to 99 (2.5 of the 3 s `ablate table`
    # spent on the committed Table 3 study).
    for n in range(2, min(noise.n_base, most + 1)):
        if enough(n):
            return SeedPlan(target, n, floor)
    low, high = max(2, noise.n_base) - 1, most
    if not enough(high):
        return SeedPlan(target, None, floor)
    while high - low > 1:  # enough(high), and not enough(low) (or low is below 2)
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return SeedPlan(target, high, floor)
