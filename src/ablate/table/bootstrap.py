"""Paired bootstrap tests over sentences, with seed noise, for corpus BLEU and perplexity: is a row better than the
base row on the same sentences? Each sentence's sufficient statistics are computed once per system and seed, so a
resample is a weighted sum (1,000 resamples over 1,000 sentences x 5 seeds take well under a second).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from ablate.eval_file import sentence_bleu_stats

_BLEU = BLEU()  # the metric ablate.metrics reports: 13a tokenisation, exp smoothing


@dataclass(frozen=True)
class PairedTest:
    """A paired bootstrap of a row against the base row (see `paired_bleu`).

    delta: observed Δ = mean over the row's seeds - mean over the base's seeds of the corpus metric;
    p_value: two-sided; low/high: percentile interval of the resampled Δ; se: their standard deviation.
    """

    delta: float
    p_value: float
    low: float
    high: float
    se: float
    n_boot: int


def bleu_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """Per-sentence sacreBLEU statistics, shape (n, 10): [len_hyp, len_ref, correct_1..4, total_1..4].

    Extracted once per system so a bootstrap resample costs a weighted sum, not a re-tokenisation.
    """
    return np.asarray(sentence_bleu_stats(hyps, refs), dtype=np.int64).reshape(len(hyps), -1)


def bleu_signature() -> str:
    """sacreBLEU's signature of the BLEU computed here from one reference per sentence (what every record holds).
    sacreBLEU knows the number of references only once it has scored, hence the one-sentence score."""
    metric = BLEU()
    metric.corpus_score(["a"], [["a"]])
    return str(metric.get_signature())


def corpus_bleu(stats: np.ndarray) -> float:
    """Corpus BLEU from per-sentence statistics; equals `BLEU().corpus_score(hyps, [refs]).score` exactly."""
    return _bleu_scores(np.asarray(stats).sum(axis=0, keepdims=True))[0]


def _bleu_scores(sums: np.ndarray) -> np.ndarray:
    """BLEU of each row of summed statistics, by sacreBLEU's own formula (Python ints, so bit-identical)."""
    rows = np.rint(sums).astype(np.int64).tolist()
    n = _BLEU.max_ngram_order
    return np.array(
        [
            _BLEU.compute_bleu(
                correct=r[2 : 2 + n],
                total=r[2 + n :],
                sys_len=r[0],
                ref_len=r[1],
                smooth_method=_BLEU.smooth_method,
                smooth_value=_BLEU.smooth_value,
                effective_order=_BLEU.effective_order,
                max_ngram_order=n,
            ).score
            for r in rows
        ]
    )


def _ppl_scores(sums: np.ndarray) -> np.ndarray:
    """Corpus perplexity exp(sum NLL / sum tokens) of each row of summed [nll, tokens]."""
    return np.exp(sums[:, 0] / sums[:, 1])


def paired_bleu(
    base: Sequence[Sequence[str]], row: Sequence[Sequence[str]], refs: Sequence[str], n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> PairedTest:
    """Paired bootstrap of corpus BLEU, row vs base, each given per seed as hypotheses aligned with `refs`.

    The observed Δ is the mean over seeds of each system's corpus BLEU, row minus base. Its bootstrap is two-level,
    so that it carries both noises of that estimate: resample b draws sentence indices with replacement (the same
    for both systems), scores every seed of each system on them, and then, per system, draws as many seeds as it
    has with replacement (see `_seed_mean`); d_b = that seed mean's BLEU, row minus base. Var(d) is then the
    sentence variance of the seed means plus s_row²/n_row + s_base²/n_base, so more seeds narrow the interval and
    the MDE as they narrow the estimate. p = (#{|d_b - mean(d)| >= |Δ|} + 1) / (B + 1): sacreBLEU's centred count,
    but centring the signed d (the null of no difference; sacreBLEU centres |d|) and counting ties as extreme, so a
    row compared with itself gets p = 1, not 1/(B + 1).
    """
    return paired_bleu_stats([bleu_stats(h, refs) for h in base], [bleu_stats(h, refs) for h in row], n_boot=n_boot, seed=seed, level=level)


def paired_bleu_stats(
    base: Sequence[np.ndarray], row: Sequence[np.ndarray], n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> PairedTest:
    """`paired_bleu` on per-seed `bleu_stats` arrays, so the base's statistics are extracted once for all rows."""
    return _paired_bootstrap(np.stack(base), np.stack(row), _bleu_scores, n_boot, seed, level)


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

    return _paired_bootstrap(with_tokens(base_nll), with_tokens(row_nll), _ppl_scores, n_boot, seed, level)


def ppl_stats(nll: Sequence[float], tokens: Sequence[float]) -> np.ndarray:
    """Per-sentence perplexity statistics, shape (n, 2): [summed NLL, target tokens]; `paired_ppl_stats` takes them."""
    if len(nll) != len(tokens):
        raise ValueError(f"{len(nll)} NLL values for {len(tokens)} token counts")
    return np.stack([np.asarray(nll, dtype=float), np.asarray(tokens, dtype=float)], axis=1).reshape(len(nll), 2)


def corpus_ppl(stats: np.ndarray) -> float:
    """Corpus perplexity exp(sum NLL / sum tokens) from `ppl_stats`."""
    return float(_ppl_scores(np.asarray(stats, dtype=float).sum(axis=0, keepdims=True))[0])


def paired_ppl_stats(
    base: Sequence[np.ndarray], row: Sequence[np.ndarray], n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> PairedTest:
    """`paired_ppl` on per-seed `ppl_stats` arrays, whose token counts may differ between systems (tokenisers)."""
    return _paired_bootstrap(np.stack(base), np.stack(row), _ppl_scores, n_boot, seed, level)


def _paired_bootstrap(base: np.ndarray, row: np.ndarray, score, n_boot: int, seed: int, level: float) -> PairedTest:
    """The shared scheme on (seeds, sentences, statistics) arrays; `score` maps summed statistics to the metric."""
    if base.shape[1:] != row.shape[1:]:
        raise ValueError(f"systems disagree on sentences/statistics: {base.shape[1:]} vs {row.shape[1:]}")
    observed = float(score(row.sum(axis=1)).mean() - score(base.sum(axis=1)).mean())
    rng = np.random.default_rng(seed)
    counts = _resample_counts(base.shape[1], n_boot, rng)
    d = _seed_mean(counts, row, score, rng) - _seed_mean(counts, base, score, rng)
    extreme = int(np.count_nonzero(np.abs(d - d.mean()) >= abs(observed)))
    low, high = np.percentile(d, [50 * (1 - level), 50 * (1 + level)])
    return PairedTest(observed, (extreme + 1) / (n_boot + 1), float(low), float(high), float(d.std(ddof=1)), n_boot)


def _resample_counts(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) multiplicities of each sentence in each resample, so resampled sums become one matmul."""
    idx = rng.integers(n, size=(n_boot, n)) + n * np.arange(n_boot)[:, None]
    return np.bincount(idx.ravel(), minlength=n_boot * n).reshape(n_boot, n).astype(float)


def _seed_mean(counts: np.ndarray, stats: np.ndarray, score, rng: np.random.Generator) -> np.ndarray:
    """Each resample's score of one system's seed mean: every seed scored on the resample's sentences, then n seeds
    drawn with replacement (n the system's seeds), their mean's deviation from the all-seed mean scaled by
    sqrt(n / (n - 1)). Plain resampling gives that deviation (n - 1)/n of the variance s²/n of a mean of n seeds
    (a third short at 3 seeds); scaled, it is s²/n. One seed: sentence noise only (its seed noise is unknown)."""
    n = stats.shape[0]
    scores = np.stack([score(counts @ stats[s]) for s in range(n)])  # (seeds, resamples)
    mean = scores.mean(axis=0)
    if n == 1:
        return mean
    drawn = rng.integers(n, size=(n, counts.shape[0]))
    picked = np.take_along_axis(scores, drawn, axis=0).mean(axis=0)
    return mean + np.sqrt(n / (n - 1)) * (picked - mean)
