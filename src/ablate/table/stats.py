"""Statistics that `ablate table` reports when it compares ablation rows with the base row and with the paper.

Seed intervals (Student t, Welch), paired bootstrap tests over sentences with seed noise for corpus BLEU and
perplexity, Holm's correction over the rows of a metric, the minimum detectable effect, a verdict per row
against the paper's sign, and Spearman's rank correlation with a bootstrap interval. Pure numpy/scipy/sacreBLEU,
so every number can be checked without a model.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

# The paired tests live in their own module; re-exported so that `stats` is the table's one statistics API.
from ablate.table.bootstrap import (  # noqa: F401
    Noise,
    PairedTest,
    bleu_signature,
    bleu_stats,
    corpus_bleu,
    corpus_ppl,
    paired_bleu,
    paired_bleu_stats,
    paired_ppl,
    paired_ppl_stats,
    ppl_stats,
    two_sided_p,
)  # fmt: skip

AGREE, DISAGREE, INCONCLUSIVE = "agree", "disagree", "inconclusive"
NO_CHANGE, NO_PAPER = "paper: no change", "no paper row"
VERDICTS = (AGREE, DISAGREE, INCONCLUSIVE, NO_CHANGE, NO_PAPER)
BLEU_TIE = 0.05  # the paper prints BLEU to 1 decimal: a printed Δ below half its last digit is 0
PPL_TIE = 0.005  # ... and PPL to 2 decimals
RANGES = {"bleu": (0.0, 100.0), "long_bleu": (0.0, 100.0), "ppl": (1.0, math.inf)}  # what a score can be (BLEU, chrF: 0-100)


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


@dataclass(frozen=True)
class VerdictCounts:
    """How many rows got each verdict, per group and over all groups (every verdict present, zeros included)."""

    by_group: dict[str, dict[str, int]]
    overall: dict[str, int]


def t_interval(values: Sequence[float], level: float = 0.95, bounds: tuple[float, float] = (-math.inf, math.inf)) -> Interval:
    """Mean and Student-t interval over seeds: with 3-5 seeds the normal quantile would be far too narrow.

    The interval is cut to `bounds`, the score's range (`RANGES`), and says so: the true mean lies in the range, so
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


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1); None or NaN (a row without a test) gives None.

    One correction over all rows of a metric: each row is tested against base, so m grows with the sweep.
    """
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None and not math.isnan(p))
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        out[i] = running
    return out


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


def verdict(
    delta: float | None,
    p_adj: float | None,
    paper_delta: float | None,
    tie: float,
    interval: tuple[float, float] | None = None,
    alpha: float = 0.05,
) -> str:
    """Does our Δ against base reproduce the paper's? One of `VERDICTS`.

    "no paper row" / "paper: no change" (|paper Δ| < tie, i.e. 0 at the paper's printed precision) are about the
    paper and counted apart. Otherwise "agree"/"disagree" by sign when significant (Holm-adjusted p <= alpha and
    the interval, if given, excludes 0), else "inconclusive": a non-significant row says nothing about the sign.
    """
    if paper_delta is None:
        return NO_PAPER
    if abs(paper_delta) < tie:
        return NO_CHANGE
    crosses = interval is not None and interval[0] <= 0.0 <= interval[1]
    if delta is None or p_adj is None or p_adj > alpha or crosses or delta == 0.0:
        return INCONCLUSIVE
    return AGREE if (delta > 0) == (paper_delta > 0) else DISAGREE


def count_verdicts(rows: Iterable[tuple[str, str]]) -> VerdictCounts:
    """Tally (group, verdict) pairs per group and overall, in the order groups first appear."""
    by_group: dict[str, dict[str, int]] = {}
    overall = dict.fromkeys(VERDICTS, 0)
    for group, v in rows:
        if v not in overall:
            raise ValueError(f"unknown verdict {v!r}")
        by_group.setdefault(group, dict.fromkeys(VERDICTS, 0))[v] += 1
        overall[v] += 1
    return VerdictCounts(by_group, overall)


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


def finite(v: float | None) -> bool:
    """A number to count: not missing, not NaN or infinite."""
    return v is not None and math.isfinite(v)
