"""Corpus BLEU and PPL from per-sentence statistics (ablate.table.corpus_scores): sacreBLEU's corpus score, bit for bit."""

import pytest
from sacrebleu.metrics import BLEU

from ablate.table.corpus_scores import bleu_stats, corpus_bleu


def test_bleu_stats_reproduce_sacrebleu_corpus_score_exactly(refs, systems, sstats):
    for hyps, s in [(systems["base"][0], sstats["base"][0]), (systems["better"][1], sstats["better"][1]), (refs, bleu_stats(refs, refs))]:
        assert s.shape == (len(refs), 10)
        assert corpus_bleu(s) == BLEU().corpus_score(hyps, [refs]).score  # bit-identical, not approx


def test_bleu_stats_of_a_subset_score_the_subset(refs, systems, sstats):
    hyps, idx = systems["base"][0], [0, 5, 5, 17, 42, 42, 42, 100]
    s = sstats["base"][0]
    assert corpus_bleu(s[idx]) == BLEU().corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]]).score


def test_bleu_stats_rejects_misaligned_inputs(refs):
    with pytest.raises(ValueError):
        bleu_stats(refs[:-1], refs)
