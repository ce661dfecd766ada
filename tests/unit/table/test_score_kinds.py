"""What the table knows of each score (ablate.table.score_kinds): the facts every column, note and verdict asks."""

from __future__ import annotations

import math

from ablate.table.score_kinds import METRICS, SCORES, finite


def test_the_papers_scores_are_named_and_printed_as_the_paper_prints_them():
    assert {k: m.label for k, m in METRICS.items()} == {"bleu": "BLEU", "ppl": "PPL"}  # column order: BLEU first
    assert [METRICS["bleu"].paper_format(), METRICS["bleu"].paper_format(signed=True)] == [".1f", "+.1f"]
    assert [METRICS["ppl"].paper_format(), METRICS["ppl"].paper_format(signed=True)] == [".2f", "+.2f"]
    # a paper Δ below half its last printed digit reads as 0: exactly the decimal, no float residue
    assert METRICS["bleu"].tie == 0.05 and METRICS["ppl"].tie == 0.005


def test_each_score_knows_its_range_its_better_direction_and_its_log_key():
    assert SCORES["bleu"].bounds == SCORES["long_bleu"].bounds == (0.0, 100.0) and SCORES["ppl"].bounds == (1.0, math.inf)
    assert METRICS["bleu"].higher_is_better and not METRICS["ppl"].higher_is_better
    assert {m.log_key for m in METRICS.values()} == {"val/bleu", "val/ppl"}
    assert set(SCORES) - set(METRICS) == {"long_bleu"} and SCORES["long_bleu"].label == "long BLEU"


def test_finite_counts_numbers_only():
    assert finite(0.0) and finite(-3) and not finite(None) and not finite(math.nan) and not finite(math.inf)
