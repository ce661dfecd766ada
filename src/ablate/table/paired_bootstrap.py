"""Paired tests over sentences, with seed noise, for corpus BLEU and perplexity: is a row better than the base row
on the same sentences? Each sentence's sufficient statistics (ablate.table.corpus_scores) are computed once per system
and seed, so a resample is a weighted sum (1,000 resamples over 1,000 sentences x 5 seeds take well under a second).
Seeds that trained as members of one group count once, by their mean (ablate.table.replicates): "seeds" below are
then replicates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from ablate.table.corpus_scores import bleu_scores, bleu_stats, ppl_scores
from ablate.table.replicates import replicate_means


@dataclass(frozen=True)
class Noise:
    """Var(Δ) by where it comes from, so a study can be planned: how would the test narrow with more seeds?

    sentences: the variance of Δ from sampling the test set's sentences, which no number of seeds removes (V_sent
    less each system's seed-by-sentence part tau²/n, floored at 0); row/base: the variance of one seed's score about
    its system's mean, sigma² (floored) + tau², which n seeds divide by n; n_row/n_base: the seeds the test had
    (replicates, where seeds trained as member groups: a group's mean is then what one "seed" scores).
    Assumes a row's seed and the base's run of the same seed number share no seed-by-sentence noise (in the Table 3
    study their residuals correlate -0.05 to +0.06 over sentence resamples, as unmatched seeds' do); where they do,
    the shared part would sit in `sentences` and the plan would ask for too few seeds.
    """

    sentences: float
    row: float
    base: float
    n_row: int
    n_base: int
    parts: int = 2  # the seed parts the test's df reads: 2 (row and base measured), 1 (paired: the row holds Var(Δ))

    def at(self, n_row: int, n_base: int) -> tuple[float, float]:
        """(Var(Δ), its df) with n_row and n_base seeds (2 or more each), counted as the test counts them (`_dof`,
        a few paired groups' own dof included): at the test's own seeds, its se² and df, unless a variance was floored
        at 0 there (sigma², or the sentences' part), which the test and the plan then count differently."""
        seeds = [(self.row / n_row, n_row - 1), (self.base / n_base, n_base - 1)][: self.parts]
        var = self.sentences + sum(v for v, _ in seeds)
        return var, _dof(var, sum(v**2 / dof for v, dof in seeds), [dof for _, dof in seeds])


SENTENCES_ONLY = "none"  # PairedTest.seed_variance of a test with one seed (or member group) a side: no seed part


@dataclass(frozen=True)
class PairedTest:
    """A paired test of a row against the base row (see `paired_bleu`).

    delta: observed Δ = mean over the row's seeds - mean over the base's seeds of the corpus metric;
    se: its standard error (sentences and seeds); df: the t degrees of freedom of se (inf: sentence noise only);
    p_value: two-sided; low/high: the t interval Δ ± t_df * se; seed_variance: where se²'s seed part comes from,
    "measured" (both systems ran two or more seeds), "borrowed" (one ran one seed and is assumed to vary as the
    other does, so the test is too narrow where the ablation widens the seed spread) or "none" (one seed each: se
    holds sentence noise only) or "paired" (member groups of the row and the base on the same schedules, paired:
    `_by_schedule`); noise: Var(Δ) by source, for planning more seeds (None unless "measured" or "paired").
    """

    delta: float
    p_value: float
    low: float
    high: float
    se: float
    n_boot: int
    df: float = math.inf
    seed_variance: str = "measured"
    noise: Noise | None = None


def paired_bleu(
    base: Sequence[Sequence[str]], row: Sequence[Sequence[str]], refs: Sequence[str], n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> PairedTest:
    """Paired bootstrap of corpus BLEU, row vs base, each given per seed as hypotheses aligned with `refs`.

    The observed Δ is the mean over seeds of each system's corpus BLEU, row minus base; its variance has two parts
    (see `_paired_bootstrap`): the sentences', from a paired bootstrap of the two seed-mean systems (B resamples of
    sentence indices with replacement, the same for both), and the seeds', the between-seed variance of each system
    less the part that sentence resampling already explains. p and the interval come from Δ / se against a t
    distribution whose degrees of freedom (Welch-Satterthwaite) reflect how few seeds estimate the seed part.
    """
    return paired_bleu_stats([bleu_stats(h, refs) for h in base], [bleu_stats(h, refs) for h in row], n_boot=n_boot, seed=seed, level=level)


def paired_bleu_stats(
    base: Sequence[np.ndarray],
    row: Sequence[np.ndarray],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    replicates: tuple[Sequence[int] | None, Sequence[int] | None] = (None, None),
    by_schedule: bool = False,
) -> PairedTest:
    """`paired_bleu` on per-seed `bleu_stats` arrays, so the base's statistics are extracted once for all rows.
    `replicates`: (base's, row's) replicate of each seed (`ablate.table.replicates.replicate_index`), None: each its own.
    `by_schedule`: replicate k of the row and of the base are member groups on one schedule, and the test pairs them."""
    return _paired_bootstrap(np.stack(base), np.stack(row), bleu_scores, n_boot, seed, level, replicates, by_schedule)


def paired_ppl(
    base_nll: Sequence[Sequence[float]],
    row_nll: Sequence[Sequence[float]],
    tokens: Sequence[float],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> PairedTest:
    """Paired bootstrap of corpus perplexity exp(sum NLL / sum tokens), the same scheme as `paired_bleu`.

    Inputs per seed: each sentence's summed target NLL (nats); `tokens`: each sentence's target token count,
    shared by all systems. Δ is PPL(row) - PPL(base): negative means the row is better.
    """
    t = np.asarray(tokens, dtype=float)

    def with_tokens(nll: Sequence[Sequence[float]]) -> np.ndarray:
        return np.stack([np.stack([np.asarray(s, dtype=float), t], axis=1) for s in nll])

    return _paired_bootstrap(with_tokens(base_nll), with_tokens(row_nll), ppl_scores, n_boot, seed, level)


def paired_ppl_stats(
    base: Sequence[np.ndarray],
    row: Sequence[np.ndarray],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    replicates: tuple[Sequence[int] | None, Sequence[int] | None] = (None, None),
    by_schedule: bool = False,
) -> PairedTest:
    """`paired_ppl` on per-seed `ppl_stats` arrays, whose token counts may differ between systems (tokenisers);
    `replicates` and `by_schedule` as in `paired_bleu_stats`."""
    return _paired_bootstrap(np.stack(base), np.stack(row), ppl_scores, n_boot, seed, level, replicates, by_schedule)


def _paired_bootstrap(
    base: np.ndarray, row: np.ndarray, score, n_boot: int, seed: int, level: float, replicates=(None, None), by_schedule=False
) -> PairedTest:
    """The shared test on (seeds, sentences, statistics) arrays; `score` maps summed statistics to the metric. With
    `replicates`, each system's seeds are first averaged per replicate, full scores and resamples alike, and every
    count below (n, the seed parts' dof) is of replicates.

    Var(Δ) = V_sent + σ²_row/n_row + σ²_base/n_base. V_sent is the bootstrap variance of the seed means' difference
    over sentence resamples: it holds every sentence-level difference, seed-by-sentence noise included. σ² is a
    system's seed variance that no sentence resampling explains (a seed better or worse everywhere): the sample
    variance of its seeds' corpus scores, s², less the seed-by-sentence part that s² also holds, which the
    resamples measure as n/(n-1) * (mean single-seed variance - variance of the seed mean); floored at 0. Adding
    s² itself would count that part twice. A one-seed system borrows the other's σ²; with one seed each there is
    none (seed_variance "none"). df = Welch-Satterthwaite over the seed parts (n - 1 each; V_sent's are many).
    """
    if base.shape[1:] != row.shape[1:]:
        raise ValueError(f"systems disagree on sentences/statistics: {base.shape[1:]} vs {row.shape[1:]}")
    units = dict(zip(("base", "row"), replicates))
    full = {k: replicate_means(score(x.sum(axis=1)), units[k]) for k, x in (("row", row), ("base", base))}  # (replicates,) corpus scores
    observed = float(full["row"].mean() - full["base"].mean())
    counts = _resample_counts(base.shape[1], n_boot, np.random.default_rng(seed))
    resampled = {
        k: replicate_means(np.stack([score(counts @ s) for s in x]), units[k]) for k, x in (("row", row), ("base", base))
    }  # (replicates, B)
    if by_schedule:
        return _by_schedule(full["row"] - full["base"], resampled["row"] - resampled["base"], n_boot, level)
    v_sent = float((resampled["row"].mean(axis=0) - resampled["base"].mean(axis=0)).var(ddof=1))
    n = {k: full[k].shape[0] for k in full}
    seeds = {k: _seed_variance(full[k], resampled[k]) for k in full}  # (sigma², s², tau²) or None
    # Seed parts: (sigma², s², tau², dof, weight). A one-seed system assumes the other's seed variance; that one estimate
    # then enters Var(Δ) with weight 1/n_row + 1/n_base, as one Welch-Satterthwaite term, not two independent ones.
    measured = [k for k in ("row", "base") if seeds[k]]
    seed_variance = (SENTENCES_ONLY, "borrowed", "measured")[len(measured)]
    if len(measured) == 2:
        parts = [(*seeds[k], n[k] - 1, 1 / n[k]) for k in measured]
    else:
        parts = [(*seeds[k], n[k] - 1, 1 / n["row"] + 1 / n["base"]) for k in measured]
    var, spread, dofs = v_sent, 0.0, []
    for sigma2, s2, _, dof, weight in parts:
        var += sigma2 * weight
        # The estimate's variance is s²'s (2 s⁴ / dof), even where it was floored at 0: the subtracted part is known
        # far better (from every sentence), so the noise of s² is what remains.
        spread += (s2 * weight) ** 2 / dof
        dofs.append(dof)
    # Welch-Satterthwaite, but never below the seed parts' own dof (where the systems' seed-by-sentence noise cancels
    # in the paired difference, s² can dwarf var and the formula alone would claim almost no dof).
    df = _dof(var, spread, dofs)
    noise = None
    if len(measured) == 2:  # the sentences' own part of V_sent: less each system's seed-by-sentence part tau²/n
        by_sentences = v_sent - sum(seeds[k][2] / n[k] for k in measured)
        per_seed = {k: seeds[k][0] + seeds[k][2] for k in measured}  # sigma² (floored) + tau²: one seed's variance
        noise = Noise(max(0.0, by_sentences), per_seed["row"], per_seed["base"], n["row"], n["base"])
    return _tested(observed, var, df, n_boot, level, seed_variance, noise)


def _by_schedule(diffs: np.ndarray, resampled: np.ndarray, n_boot: int, level: float) -> PairedTest:
    """The test paired by schedule: `diffs` (G,) row - base per schedule, `resampled` (G, B) the same per sentence
    resample. The differences are one system of G replicates: Var(Δ) = V_sent + σ²_Δ / G with σ²_Δ from their spread,
    less its seed-by-sentence part, as `_paired_bootstrap` takes a system's; df: G - 1 at least (seed_variance
    "paired"). What a schedule does to both rows alike cancels in each difference."""
    g = diffs.shape[0]
    v_sent = float(resampled.mean(axis=0).var(ddof=1))
    sigma2, s2, tau2 = _seed_variance(diffs, resampled)
    var, spread = v_sent + sigma2 / g, (s2 / g) ** 2 / (g - 1)
    df = _dof(var, spread, [g - 1])
    noise = Noise(max(0.0, v_sent - tau2 / g), sigma2 + tau2, 0.0, g, g, parts=1)  # a plan in pairs of groups
    return _tested(float(diffs.mean()), var, df, n_boot, level, "paired", noise)


FEW_DOF = 4  # one seed part with fewer dof: the t takes its dof, not Welch-Satterthwaite's estimate


def _dof(var: float, spread: float, dofs: list[int]) -> float:
    """The t's degrees of freedom: Welch-Satterthwaite's var² / spread, never below the seed parts' own dof. Where one
    seed variance with fewer than FEW_DOF dof makes the seed part (a one-seed row borrowing 2-4 base seeds' variance,
    2-4 schedules paired; a plan for so few paired groups too, Noise.at), that estimate is itself so noisy that it runs high exactly where s² came out small, and the
    test rejected a true null up to twice as often as it said (up to 12% at p <= 0.05 and 8% at p <= 0.01 where the
    row favours other sentences than the base; tests/unit/table/test_paired_bootstrap.py): there the t has that
    variance's own dof, as with seed noise alone (conservative where sentences add noise, estimated far better)."""
    if len(dofs) == 1 and dofs[0] < FEW_DOF:
        return float(dofs[0])
    return max(var**2 / spread, min(dofs)) if spread > 0 else math.inf


def _tested(observed: float, var: float, df: float, n_boot: int, level: float, seed_variance: str, noise) -> PairedTest:
    if var == 0.0:  # no noise at all: the difference is exact
        return PairedTest(observed, 1.0 if observed == 0.0 else 0.0, observed, observed, 0.0, n_boot, df, seed_variance, noise)
    se = math.sqrt(var)
    half = float(st.t.ppf(0.5 + level / 2, df)) * se
    return PairedTest(observed, two_sided_p(observed, se, df), observed - half, observed + half, se, n_boot, df, seed_variance, noise)


def two_sided_p(estimate: float, se: float, df: float) -> float:
    """Two-sided Student-t p of estimate = 0; with no noise at all (se 0) the estimate is exact: 1 at 0, else 0."""
    if se == 0.0:
        return 1.0 if estimate == 0.0 else 0.0
    return float(2 * st.t.sf(abs(estimate) / se, df))


def _seed_variance(full: np.ndarray, resampled: np.ndarray) -> tuple[float, float, float] | None:
    """(sigma², s², tau²): a system's seed variance beyond seed-by-sentence noise (see `_paired_bootstrap`), the
    sample variance of its seeds' scores it is taken from, and the seed-by-sentence part tau²; None with one seed.
    tau² is never negative but by rounding (a mean's variance is at most its parts' mean variance): floored at 0, and
    sigma² <= s²."""
    n = full.shape[0]
    if n < 2:
        return None
    s2 = float(full.var(ddof=1))
    tau2 = max(0.0, float(n / (n - 1) * (resampled.var(axis=1, ddof=1).mean() - resampled.mean(axis=0).var(ddof=1))))
    return max(0.0, s2 - tau2), s2, tau2


def _resample_counts(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) multiplicities of each sentence in each resample, so resampled sums become one matmul."""
    idx = rng.integers(n, size=(n_boot, n)) + n * np.arange(n_boot)[:, None]
    return np.bincount(idx.ravel(), minlength=n_boot * n).reshape(n_boot, n).astype(float)
