"""Translation quality on detokenized text: corpus BLEU and chrF by sacreBLEU, each with the signature that says how
it was computed (tokenizer, smoothing, version), as reported in the field since Post (2018); and perplexity from a
summed NLL."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass
class Score:
    score: float
    signature: str


def bleu(hyps: list[str], refs: list[str]) -> Score:
    """Corpus BLEU with sacreBLEU's default 13a tokenization."""
    metric = BLEU()
    return Score(metric.corpus_score(hyps, [refs]).score, str(metric.get_signature()))


def perplexity(nll: float, tokens: float) -> float:
    """exp(NLL per token), capped at e^50 to stay a float; a non-finite NLL (an overflow) has no perplexity: inf. One
    rule for a run's validation, a member's and an evaluation record's."""
    per_token = nll / max(tokens, 1.0)
    return math.exp(min(per_token, 50.0)) if math.isfinite(per_token) else math.inf


def chrf(hyps: list[str], refs: list[str]) -> Score:
    metric = CHRF()
    return Score(metric.corpus_score(hyps, [refs]).score, str(metric.get_signature()))


def score(hyps: list[str], refs: list[str]) -> dict:
    if not refs:
        raise ValueError("no sentences to score (the test set is empty)")
    b, c = bleu(hyps, refs), chrf(hyps, refs)
    return {
        "bleu": round(b.score, 2),
        "bleu_signature": b.signature,
        "chrf": round(c.score, 2),
        "chrf_signature": c.signature,
        "sentences": len(refs),
    }


def validation_scores(sums: list[float], hyps: dict[int, list[int]], decode, refs: list[str]) -> tuple[dict, str | None]:
    """A validation's metrics, a run's and each member's alike: loss, NLL and perplexity per real target token from
    `sums` (summed loss, NLL, tokens), and with `hyps` (sentence index -> token ids) their BLEU against `refs` in
    sentence order, ids made text by `decode`; and BLEU's signature (None without hypotheses)."""
    loss, nll, tokens = sums
    tokens = max(tokens, 1.0)
    metrics = {"val/loss": loss / tokens, "val/nll": nll / tokens, "val/ppl": perplexity(nll, tokens)}
    if not hyps:
        return metrics, None
    order = sorted(hyps)
    result = bleu(decode([hyps[i] for i in order]), [refs[i] for i in order])
    return metrics | {"val/bleu": result.score}, result.signature
