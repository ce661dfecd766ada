"""A verdict per row against the paper's sign, and their counts (ablate.table.verdicts)."""

import pytest

from ablate.table.holm import holm
from ablate.table.score_kinds import METRICS
from ablate.table.verdicts import (
    AGREE,
    DISAGREE,
    INCONCLUSIVE,
    NO_CHANGE,
    NO_CHANGE_OURS_DIFFERS,
    NO_PAPER,
    ONE_SEED,
    VERDICTS,
    count_verdicts,
    verdict,
)

BLEU_TIE, PPL_TIE = METRICS["bleu"].tie, METRICS["ppl"].tie


@pytest.mark.parametrize(
    "args, expected",
    [
        ((0.8, 0.001, 0.5, BLEU_TIE), AGREE),
        ((-0.8, 0.001, -0.5, BLEU_TIE), AGREE),
        ((0.8, 0.001, -0.5, BLEU_TIE), DISAGREE),
        ((-3.0, 0.01, 0.4, PPL_TIE), DISAGREE),
        ((0.8, 0.2, 0.5, BLEU_TIE), INCONCLUSIVE),
        ((0.8, None, 0.5, BLEU_TIE), INCONCLUSIVE),
        ((0.8, 0.2, 0.0, BLEU_TIE), NO_CHANGE),
        ((0.8, None, 25.9 - 25.9, BLEU_TIE), NO_CHANGE),
        # significant against the paper's 0: said, not read as agreement (A-h16 at d_model 64 lost 1.5 BLEU)
        ((0.8, 0.001, 0.0, BLEU_TIE), NO_CHANGE_OURS_DIFFERS),
        ((0.8, 0.001, 25.9 - 25.9, BLEU_TIE), NO_CHANGE_OURS_DIFFERS),
        ((0.8, 0.001, 4.92 - 4.92, PPL_TIE), NO_CHANGE_OURS_DIFFERS),
        ((0.8, 0.001, 25.9 - 25.8, BLEU_TIE), AGREE),
        ((0.8, 0.001, None, BLEU_TIE), NO_PAPER),
        ((0.8, 0.2, None, BLEU_TIE), NO_PAPER),
    ],
)
def test_verdict(args, expected):
    assert verdict(*args) == expected


def test_verdict_interval_crossing_zero_is_inconclusive_even_with_small_p():
    assert verdict(0.8, 0.001, 0.5, BLEU_TIE, interval=(-0.1, 1.6)) == INCONCLUSIVE
    assert verdict(0.8, 0.001, 0.5, BLEU_TIE, interval=(0.1, 1.6)) == AGREE
    assert verdict(0.8, 0.05, 0.5, BLEU_TIE) == AGREE and verdict(0.8, 0.0501, 0.5, BLEU_TIE) == INCONCLUSIVE
    assert verdict(0.8, 0.001, 0.0, BLEU_TIE, interval=(-0.1, 1.6)) == NO_CHANGE


def test_verdict_on_a_bootstrap_result(boot):
    raw = [boot[k] for k in ("better", "one_better")]
    adj = holm([r.p_value for r in raw])
    got = [verdict(r.delta, p, 1.0, BLEU_TIE, interval=(r.low, r.high)) for r, p in zip(raw, adj)]
    assert got == [AGREE, INCONCLUSIVE]


def test_a_test_without_seed_noise_reads_no_sign_however_small_its_p():
    """One seed (or member group) a side: the test holds sentence noise only, which one seed's luck exceeds, so a
    significant Δ is "inconclusive (one seed)", never agree/disagree, "ours differs" nor "paper: no change"; a
    non-significant one is a plain inconclusive (or the paper's no change)."""
    assert verdict(0.8, 1e-60, 0.5, BLEU_TIE, interval=(0.7, 0.9), seed_noise=False) == ONE_SEED
    assert verdict(0.8, 1e-60, -0.5, BLEU_TIE, interval=(0.7, 0.9), seed_noise=False) == ONE_SEED
    assert verdict(0.8, 0.3, 0.5, BLEU_TIE, interval=(-0.1, 1.7), seed_noise=False) == INCONCLUSIVE
    assert verdict(0.8, 1e-60, 0.0, BLEU_TIE, interval=(0.7, 0.9), seed_noise=False) == ONE_SEED  # not "no change"
    assert verdict(0.8, 0.3, 0.0, BLEU_TIE, interval=(-0.1, 1.7), seed_noise=False) == NO_CHANGE
    assert verdict(0.8, 1e-60, None, BLEU_TIE, seed_noise=False) == NO_PAPER


def test_count_verdicts():
    counts = count_verdicts([("A", AGREE), ("A", INCONCLUSIVE), ("B", AGREE), ("A", AGREE), ("C", NO_PAPER)])
    assert list(counts.by_group) == ["A", "B", "C"]
    assert counts.by_group["A"] == {**dict.fromkeys(VERDICTS, 0), AGREE: 2, INCONCLUSIVE: 1}
    assert counts.overall == {AGREE: 3, DISAGREE: 0, INCONCLUSIVE: 1, ONE_SEED: 0, NO_CHANGE: 0, NO_CHANGE_OURS_DIFFERS: 0, NO_PAPER: 1}
    assert count_verdicts([]).overall == dict.fromkeys(VERDICTS, 0)
    with pytest.raises(ValueError):
        count_verdicts([("A", "maybe")])
