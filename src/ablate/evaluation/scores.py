"""Translation quality on detokenized text: corpus BLEU and chrF by sacreBLEU, each with the signature that says how
it was computed (tokenizer, smoothing, version), as reported in the field since Post (2018)."""

from __future__ import annotations

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
