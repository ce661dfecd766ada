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


# sacreBLEU's own choice for a target language (its command line's `-l en-zh`): 13a splits at spaces and punctuation,
# which leaves a Chinese or Japanese sentence one word and its BLEU near 0 whatever the model does.
_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}
_EXTRAS = {"ja-mecab": "ja", "ko-mecab": "ko"}


def bleu_tokenizer(tgt_lang: str) -> str:
    """The sacreBLEU tokenizer BLEU on `tgt_lang` (data.tgt_lang) text is scored with: 13a but for zh, ja and ko."""
    return _TOKENIZERS.get(tgt_lang, "13a")


def bleu_metric(tokenize: str = "13a") -> BLEU:
    """sacreBLEU's BLEU with `tokenize`; a tokenizer whose extra package is not installed is an error saying which."""
    try:
        return BLEU(tokenize=tokenize)
    except RuntimeError as e:  # sacreBLEU's "Japanese tokenization requires extra dependencies ..."
        extra = _EXTRAS.get(tokenize, tokenize)
        raise ValueError(
            f"BLEU with sacreBLEU's {tokenize} tokenizer needs its extra package: pip install 'sacrebleu[{extra}]' ({str(e).strip().splitlines()[0]})"
        ) from None


def bleu_problem(tgt_lang: str) -> str | None:
    """Why BLEU cannot be scored on `tgt_lang` here (its tokenizer's extra package missing), asked before training."""
    try:
        bleu_metric(bleu_tokenizer(tgt_lang))
    except ValueError as e:
        return f"data.tgt_lang={tgt_lang}: {e}"
    return None


def bleu(hyps: list[str], refs: list[str], tokenize: str = "13a") -> Score:
    """Corpus BLEU, tokenized by `tokenize` (bleu_tokenizer of the target language)."""
    metric = bleu_metric(tokenize)
    return Score(metric.corpus_score(hyps, [refs]).score, str(metric.get_signature()))


MAX_NLL_PER_TOKEN = 50.0  # perplexity's cap, e^50: a float, and far above any run that trains


def perplexity(nll: float, tokens: float) -> float:
    """exp(NLL per token), capped at e^MAX_NLL_PER_TOKEN to stay a float; a non-finite NLL (an overflow) has no
    perplexity: inf. One rule for a run's validation, a member's and an evaluation record's; the table's bootstrap
    applies it to arrays (ablate.table.corpus_scores.ppl_scores)."""
    per_token = nll / max(tokens, 1.0)
    return math.exp(min(per_token, MAX_NLL_PER_TOKEN)) if math.isfinite(per_token) else math.inf


def chrf(hyps: list[str], refs: list[str]) -> Score:
    metric = CHRF()
    return Score(metric.corpus_score(hyps, [refs]).score, str(metric.get_signature()))


def score(hyps: list[str], refs: list[str], tokenize: str = "13a") -> dict:
    if not refs:
        raise ValueError("no sentences to score (the test set is empty)")
    b, c = bleu(hyps, refs, tokenize), chrf(hyps, refs)
    return {
        "bleu": round(b.score, 2),
        "bleu_signature": b.signature,
        "chrf": round(c.score, 2),
        "chrf_signature": c.signature,
        "sentences": len(refs),
    }


def validation_scores(
    sums: list[float], hyps: dict[int, list[int]], decode, refs: list[str], tokenize: str = "13a"
) -> tuple[dict, str | None]:
    """A validation's metrics, a run's and each member's alike: loss, NLL and perplexity per real target token from
    `sums` (summed loss, NLL, tokens), and with `hyps` (sentence index -> token ids) their BLEU against `refs` in
    sentence order, ids made text by `decode`; and BLEU's signature (None without hypotheses)."""
    loss, nll, tokens = sums
    tokens = max(tokens, 1.0)
    metrics = {"val/loss": loss / tokens, "val/nll": nll / tokens, "val/ppl": perplexity(nll, tokens)}
    if not hyps:
        return metrics, None
    order = sorted(hyps)
    result = bleu(decode([hyps[i] for i in order]), [refs[i] for i in order], tokenize)
    return metrics | {"val/bleu": result.score}, result.signature
