"""Did the runs that trained longer score better? Within a row every run has the same configuration, so where a
stopping rule (convergence, early stopping) ended them after different numbers of updates, a score that still
rises with training length says the rule stopped them short of convergence: the row's spread then holds where the
rule fired as well as seed noise, and a row whose runs stop earlier on average is compared partly on length.

The slope is the pooled within-row least-squares fit of the score on log2(updates) (each row about its own means,
so row effects drop out): the change per doubling of training. Its interval and p are Student-t with n - rows - 1
degrees of freedom. It is a correlation: a run the rule stops late may be one that was still improving, so the
causal check is a control row trained longer (base-2x). Runs that trained equally long (a cap, a budget) add
nothing to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from ablate.table import stats

MIN_DF = 2  # residual degrees of freedom below which no slope is worth printing


@dataclass(frozen=True)
class TrainingLength:
    slope: float  # change in the score per doubling of updates, within rows
    low: float  # its 95% interval (`level`)
    high: float
    p: float  # two-sided, slope = 0
    r: float  # within-row Pearson r of the score and log2(updates)
    runs: int  # in the rows counted: those whose runs trained for different numbers of updates
    rows: int
    shortest: int  # updates, over the runs counted
    longest: int


def training_length(rows: Mapping[str, Sequence[tuple[float, float]]], level: float = 0.95) -> TrainingLength | None:
    """`rows`: row -> [(updates, score)] per run. None when fewer than MIN_DF residual degrees of freedom remain
    from rows of 2+ runs whose lengths differ, or when the scores do not vary about their rows' means."""
    blocks = []
    for runs in rows.values():
        kept = np.array([(u, v) for u, v in runs if stats.finite(u) and u > 0 and stats.finite(v)], dtype=float).reshape(-1, 2)
        if len(kept) >= 2 and np.ptp(kept[:, 0]) > 0:
            x, y = np.log2(kept[:, 0]), kept[:, 1]
            blocks.append((x - x.mean(), y - y.mean(), kept[:, 0]))
    n = sum(len(b[0]) for b in blocks)
    df = n - len(blocks) - 1
    if df < MIN_DF:
        return None
    x, y = (np.concatenate([b[i] for b in blocks]) for i in (0, 1))
    sxx, syy, sxy = float(x @ x), float(y @ y), float(x @ y)
    if syy == 0:
        return None
    slope = sxy / sxx
    se = math.sqrt(max(syy - slope * sxy, 0.0) / df / sxx)
    q = float(st.t.ppf(0.5 + level / 2, df))
    p = stats.two_sided_p(slope, se, df)
    updates = np.concatenate([b[2] for b in blocks])
    return TrainingLength(
        slope=slope,
        low=slope - q * se,
        high=slope + q * se,
        p=p,
        r=sxy / math.sqrt(sxx * syy),
        runs=n,
        rows=len(blocks),
        shortest=int(updates.min()),
        longest=int(updates.max()),
    )
