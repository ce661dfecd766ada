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


def test_the_tables_perplexity_follows_the_runs_rule_cap_and_all():
    """The table's corpus perplexity was an uncapped exp: 1.1e26 where the run's own record said 5.2e21 (e^50)."""
    from ablate.evaluation.scores import perplexity
    from ablate.table.corpus_scores import corpus_ppl, ppl_stats

    for nll, tokens in [(30.0, 10), (600.0, 10), (float("inf"), 10), (3.0, 0)]:
        assert corpus_ppl(ppl_stats([nll], [tokens])) == pytest.approx(perplexity(nll, tokens))
