"""The minimum detectable effect (MDE) of a paired test, and the seeds a row would need for a target MDE at the noise
a test measured (ablate.table.paired_bootstrap.Noise): a plan for the next study.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as st

from ablate.table.paired_bootstrap import Noise


def mde(se: float | None, alpha: float = 0.05, m: int = 1, power: float = 0.8, df: float = math.inf) -> float | None:
    """Minimum detectable effect: the smallest |Δ| found with probability `power` by a two-sided test at alpha/m.

    MDE = (t_{df, 1 - alpha/(2m)} + t_{df, power}) * SE, SE and df those of the paired test (`PairedTest`); with
    df = inf the t quantiles are the normal's. alpha/m is Holm's strictest step (Bonferroni), so the MDE is
    conservative for every row Holm ranks later.
    """
    if se is None:
        return None
    return float(st.t.ppf(1 - alpha / (2 * m), df) + st.t.ppf(power, df)) * se


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
    for n in range(2, most + 1):
        var, df = noise.at(n, max(n, noise.n_base))
        if mde(math.sqrt(var), alpha, m, power, df) <= target:
            return SeedPlan(target, n, floor)
    return SeedPlan(target, None, floor)
