"""Corpus BLEU and perplexity from per-sentence sufficient statistics ([len_hyp, len_ref, correct_1..4, total_1..4] and
[summed NLL, tokens]), extracted once per system and seed: summed and scored by sacreBLEU's own formula, so a
bootstrap resample (ablate.table.paired_bootstrap) is a weighted sum, and the score equals sacreBLEU's corpus score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sacrebleu.metrics import BLEU

from ablate.evaluation.records import sentence_bleu_stats
from ablate.evaluation.scores import MAX_NLL_PER_TOKEN, bleu_metric

_BLEU = BLEU()  # the formula ablate.evaluation.scores.bleu reports by (exp smoothing), whatever the tokenizer


def bleu_stats(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> np.ndarray:
    """Per-sentence sacreBLEU statistics, shape (n, 10): [len_hyp, len_ref, correct_1..4, total_1..4].

    Extracted once per system so a bootstrap resample costs a weighted sum, not a re-tokenisation.
    """
    return np.asarray(sentence_bleu_stats(hyps, refs, tokenize), dtype=np.int64).reshape(len(hyps), -1)


def bleu_signature(tokenize: str = "13a") -> str:
    """sacreBLEU's signature of the BLEU computed here from one reference per sentence (what every record holds),
    tokenized by `tokenize`. sacreBLEU knows the number of references only once it has scored, hence the one-sentence
    score."""
    metric = bleu_metric(tokenize)
    metric.corpus_score(["a"], [["a"]])
    return str(metric.get_signature())


def corpus_bleu(stats: np.ndarray) -> float:
    """Corpus BLEU from per-sentence statistics; equals `BLEU().corpus_score(hyps, [refs]).score` exactly."""
    return bleu_scores(np.asarray(stats).sum(axis=0, keepdims=True))[0]


def bleu_scores(sums: np.ndarray) -> np.ndarray:
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


def ppl_scores(sums: np.ndarray) -> np.ndarray:
    """Corpus perplexity of each row of summed [nll, tokens], by the rule of ablate.evaluation.scores.perplexity (a
    nearly diverged run's table figure was uncapped, its run's capped)."""
    per_token = sums[:, 0] / np.maximum(sums[:, 1], 1.0)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(per_token), np.exp(np.minimum(per_token, MAX_NLL_PER_TOKEN)), np.inf)


def ppl_stats(nll: Sequence[float], tokens: Sequence[float]) -> np.ndarray:
    """Per-sentence perplexity statistics, shape (n, 2): [summed NLL, target tokens]; `paired_ppl_stats` takes them."""
    if len(nll) != len(tokens):
        raise ValueError(f"{len(nll)} NLL values for {len(tokens)} token counts")
    return np.stack([np.asarray(nll, dtype=float), np.asarray(tokens, dtype=float)], axis=1).reshape(len(nll), 2)


def corpus_ppl(stats: np.ndarray) -> float:
    """Corpus perplexity exp(sum NLL / sum tokens) from `ppl_stats`."""
    return float(ppl_scores(np.asarray(stats, dtype=float).sum(axis=0, keepdims=True))[0])
