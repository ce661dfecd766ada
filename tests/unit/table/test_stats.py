"""ablate.stats against hand-computed values, scipy and sacreBLEU, and on crafted systems with known answers."""

import math
import statistics
import time

import numpy as np
import pytest
from sacrebleu.metrics import BLEU
from scipy import stats as st

from ablate.table import stats
from ablate.table.stats import (
    AGREE,
    BLEU_TIE,
    DISAGREE,
    INCONCLUSIVE,
    NO_CHANGE,
    NO_PAPER,
    PPL_TIE,
    RANGES,
    VERDICTS,
    Interval,
    bleu_stats,
    corpus_bleu,
    corpus_ppl,
    count_verdicts,
    holm,
    mde,
    paired_bleu,
    paired_bleu_stats,
    paired_ppl,
    paired_ppl_stats,
    ppl_stats,
    spearman_with_interval,
    t_interval,
    verdict,
    welch_interval,
)

VOCAB = [f"w{i}" for i in range(400)]


def _sentence(rng):
    return " ".join(rng.choice(VOCAB, size=int(rng.integers(5, 20)))) + str(rng.choice([".", ",", "!", "?", ""]))


@pytest.fixture(scope="module")
def refs():
    rng = np.random.default_rng(123)
    return [_sentence(rng) for _ in range(300)]


def _system(refs, copy_rate, seed):
    """One seed's output: the reference in about `copy_rate` of the sentences, random words elsewhere."""
    rng = np.random.default_rng(seed)
    return [ref if rng.random() < copy_rate else _sentence(rng) for ref in refs]


@pytest.fixture(scope="module")
def systems(refs):
    """Three seeds each: base copies ~30% of references, better ~60%; one_better is better on one seed only."""
    base = [_system(refs, 0.3, 10 + s) for s in range(3)]
    better = [_system(refs, 0.6, 20 + s) for s in range(3)]
    return {"base": base, "better": better, "one_better": [better[0], base[1], base[2]]}


@pytest.fixture(scope="module")
def sstats(refs, systems):
    """Per-seed BLEU statistics of each system, extracted once for the whole module."""
    return {name: [bleu_stats(h, refs) for h in seeds] for name, seeds in systems.items()}


@pytest.fixture(scope="module")
def boot(sstats):
    """The paired bootstrap of each system against base."""
    return {name: paired_bleu_stats(sstats["base"], s) for name, s in sstats.items()}


# --- seed intervals -----------------------------------------------------------------------------------------


def test_t_interval_matches_hand_value():
    iv = t_interval([1, 2, 3, 4, 5])
    half = 2.7764451051977987 * math.sqrt(2.5) / math.sqrt(5)  # t_{0.975, 4} * sd / sqrt(n)
    assert (iv.mean, iv.n) == (3.0, 5)
    assert iv.sd == pytest.approx(math.sqrt(2.5))
    assert (iv.low, iv.high) == pytest.approx((3 - half, 3 + half))


def test_t_interval_level_matches_scipy():
    values = [27.1, 26.4, 27.9, 26.8]
    iv = t_interval(values, level=0.9)
    low, high = st.t.interval(0.9, len(values) - 1, loc=np.mean(values), scale=st.sem(values))
    assert (iv.low, iv.high) == pytest.approx((low, high))


def test_t_interval_one_seed_has_no_spread():
    assert t_interval([25.3]) == stats.Interval(25.3, None, None, 1, None)
    with pytest.raises(ValueError):
        t_interval([])


def test_welch_interval_matches_scipy():
    row, base = [25.1, 25.9, 26.3, 24.8, 25.5], [24.0, 24.2, 23.1]
    diff = welch_interval(row, base)
    ci = st.ttest_ind(row, base, equal_var=False).confidence_interval(0.95)
    assert diff.delta == pytest.approx(np.mean(row) - np.mean(base))
    assert (diff.low, diff.high) == pytest.approx((ci.low, ci.high))
    va, vb = np.var(row, ddof=1) / 5, np.var(base, ddof=1) / 3
    assert diff.df == pytest.approx((va + vb) ** 2 / (va**2 / 4 + vb**2 / 2))
    assert diff.se == pytest.approx(math.sqrt(va + vb))


def test_welch_interval_needs_two_seeds_per_row():
    diff = welch_interval([25.0], [24.0, 24.5])
    assert diff.delta == pytest.approx(0.75)
    assert (diff.low, diff.high, diff.df, diff.se) == (None, None, None, None)
    alike = welch_interval([2.0, 2.0], [1.0, 1.0])  # seeds that all score alike: no interval, not a width-0 one
    assert (alike.delta, alike.low, alike.high, alike.df, alike.se) == (1.0, None, None, None, 0.0)


def test_t_interval_is_cut_at_the_scores_range_and_says_so():
    """BLEU of 0.5, 0.2 and 4.0: t(2) * sd / sqrt(3) = 5.24 around 1.57 reaches -3.67, cut at 0; the top is not cut."""
    half = st.t.ppf(0.975, 2) * statistics.stdev([0.5, 0.2, 4.0]) / math.sqrt(3)
    cut = t_interval([0.5, 0.2, 4.0], bounds=RANGES["bleu"])
    assert (cut.low, cut.high, cut.clipped) == (0.0, pytest.approx(1.5667 + half, abs=1e-4), True)
    assert t_interval([0.5, 0.2, 4.0]).low == pytest.approx(1.5667 - half, abs=1e-4)  # unbounded: as t gives it
    assert t_interval([99.0, 99.5, 97.0], bounds=RANGES["bleu"]).high == 100.0 and not t_interval([30.0, 31.0]).clipped
    assert t_interval([0.0, 0.0, 0.0], bounds=RANGES["bleu"]) == Interval(0.0, None, None, 3, 0.0)  # all alike: no interval


# --- BLEU from sufficient statistics ------------------------------------------------------------------------


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


# --- paired bootstrap ---------------------------------------------------------------------------------------


def test_paired_bleu_clearly_better_system_is_significant(refs, systems, boot):
    res = boot["better"]
    per_seed = [BLEU().corpus_score(h, [refs]).score for h in systems["better"] + systems["base"]]
    assert res.delta == pytest.approx(np.mean(per_seed[:3]) - np.mean(per_seed[3:]))
    assert res.delta > 0 and res.p_value < 0.01
    assert 0 < res.low < res.delta < res.high
    assert res.n_boot == 1000


def test_paired_bleu_identical_system_is_not_significant(boot):
    res = boot["base"]
    assert res.delta == 0.0
    assert res.p_value > 0.5
    assert res.low < 0 < res.high


def test_paired_bleu_seed_noise_widens_interval_and_raises_p(boot):
    all_better, one_better = boot["better"], boot["one_better"]
    assert one_better.delta > 0
    assert one_better.p_value > 0.1 > 10 * all_better.p_value
    assert one_better.high - one_better.low > all_better.high - all_better.low
    assert one_better.se > all_better.se


def test_paired_bleu_single_seed_is_a_plain_paired_bootstrap(sstats):
    """One seed each: no seed variance to estimate, so the SE is the plain paired bootstrap's over sentences and
    the p-value the normal's (df infinite)."""
    from ablate.table.bootstrap import _resample_counts

    base, row = sstats["base"][0], sstats["better"][0]
    res = paired_bleu_stats([base], [row], n_boot=500, seed=4)
    assert res.delta == corpus_bleu(row) - corpus_bleu(base)
    counts = _resample_counts(len(base), 500, np.random.default_rng(4))
    plain = [corpus_bleu(c[:, None] * row) - corpus_bleu(c[:, None] * base) for c in counts]
    assert res.se == pytest.approx(np.std(plain, ddof=1)) and res.df == math.inf and res.seed_variance == "none"
    assert res.p_value == pytest.approx(2 * st.norm.sf(res.delta / res.se)) and res.p_value < 0.01


def test_paired_bootstrap_se_is_the_standard_error_of_the_seed_means():
    """Each seed's NLL a fixed multiple of its tokens: no sentence noise, so the SE of Δ is the seed means' own,
    sqrt(s_row²/n_row + s_base²/n_base) with s the sample sd of the per-seed PPLs (not one seed's spread, which
    would not shrink as seeds are added)."""
    tokens = np.random.default_rng(0).integers(5, 40, size=300).astype(float)
    levels = {"base": [2.0, 2.1, 1.9, 2.05, 1.95], "row": [1.8, 1.95, 1.7]}
    res = paired_ppl([tokens * v for v in levels["base"]], [tokens * v for v in levels["row"]], tokens, n_boot=4000)
    s_base, s_row = (np.std(np.exp(levels[k]), ddof=1) for k in ("base", "row"))
    assert res.seed_variance == "measured" and res.se == pytest.approx(math.sqrt(s_row**2 / 3 + s_base**2 / 5), rel=0.08)
    assert res.delta == pytest.approx(np.mean(np.exp(levels["row"])) - np.mean(np.exp(levels["base"])))


def test_a_one_seed_row_borrows_the_base_seed_variance_as_one_estimate():
    """No sentence noise, a 5-seed base and a 1-seed row: Var(Δ) = s²_base (1/1 + 1/5), and that one estimate, on 4
    dof, is one Welch-Satterthwaite term: df = Var² / ((s² (1 + 1/5))² / 4) = 4 exactly (two terms would claim 5.2)."""
    tokens = np.random.default_rng(0).integers(5, 40, size=300).astype(float)
    base, row = [2.0, 2.1, 1.9, 2.05, 1.95], [1.8]
    res = paired_ppl([tokens * v for v in base], [tokens * v for v in row], tokens, n_boot=500)
    s2 = np.var(np.exp(base), ddof=1)
    assert res.seed_variance == "borrowed" and res.se == pytest.approx(math.sqrt(s2 * (1 + 1 / 5)), rel=1e-6)
    assert res.df == pytest.approx(4.0)


def test_paired_bleu_more_seeds_narrow_the_test(refs):
    """The same systems with 6 seeds instead of 2: a smaller SE (so a smaller MDE) for the better-estimated Δ."""
    few = paired_bleu_stats(
        *([bleu_stats(_system(refs, rate, 40 + 10 * k + s), refs) for s in range(2)] for k, rate in enumerate((0.3, 0.35)))
    )
    many = paired_bleu_stats(
        *([bleu_stats(_system(refs, rate, 40 + 10 * k + s), refs) for s in range(6)] for k, rate in enumerate((0.3, 0.35)))
    )
    assert many.se < 0.8 * few.se, (few.se, many.se)


@pytest.mark.parametrize(
    ("seed_sd", "sentence_sd"),
    [(0.0, 0.3), (0.05, 0.01), (0.02, 0.3)],
    ids=["seed-by-sentence noise only", "seed noise only", "both"],
)
@pytest.mark.parametrize(("n_row", "n_base"), [(3, 5), (2, 2)])
def test_paired_test_holds_its_level_under_the_null(seed_sd, sentence_sd, n_row, n_base):
    """Row and base drawn alike (a shared sentence difficulty, a per-seed offset of sd `seed_sd`, per-seed-and-
    sentence noise of sd `sentence_sd`): 400 such studies reject at p <= 0.05 in at most 8% of them and at p <= 0.01
    in at most 2.5%, whichever noise dominates (drawing one seed per system per resample, as ablate did before,
    rejected 0-0.4% without seed noise and 33% with two seeds of seed noise alone)."""
    rng = np.random.default_rng(0)

    def system(n, tokens, difficulty):
        level = 2.0 + difficulty
        return [
            ppl_stats(tokens * (level + rng.normal(0, seed_sd) + rng.normal(0, sentence_sd, size=tokens.size)), tokens) for _ in range(n)
        ]

    ps = []
    for k in range(400):
        tokens, difficulty = rng.integers(5, 30, size=150).astype(float), rng.normal(0, 0.3, size=150)
        ps.append(paired_ppl_stats(system(n_base, tokens, difficulty), system(n_row, tokens, difficulty), n_boot=200, seed=k).p_value)
    ps = np.array(ps)
    assert 0.005 <= np.mean(ps <= 0.05) <= 0.08 and np.mean(ps <= 0.01) <= 0.025, (np.mean(ps <= 0.05), np.mean(ps <= 0.01))


def test_paired_bleu_on_text_equals_paired_bleu_on_stats(refs, systems, sstats):
    base, row = [h[:60] for h in systems["base"]], [h[:60] for h in systems["better"]]
    assert paired_bleu(base, row, refs[:60], n_boot=200, seed=3) == paired_bleu_stats(
        [s[:60] for s in sstats["base"]], [s[:60] for s in sstats["better"]], n_boot=200, seed=3
    )


def test_paired_bootstrap_is_deterministic_given_seed(sstats):
    base, row = sstats["base"], sstats["one_better"]
    assert paired_bleu_stats(base, row, seed=7) == paired_bleu_stats(base, row, seed=7)
    assert paired_bleu_stats(base, row, seed=7) != paired_bleu_stats(base, row, seed=8)


def test_paired_bootstrap_rejects_misaligned_systems(sstats):
    base = sstats["base"]
    with pytest.raises(ValueError):
        paired_bleu_stats(base, [b[:-1] for b in base])


def test_paired_bleu_is_fast_on_a_realistic_size():
    rng = np.random.default_rng(0)
    totals = rng.integers(5, 40, size=(1000, 4))

    def seed_stats():
        return np.hstack([totals[:, :1], totals[:, :1] + 1, rng.integers(0, totals + 1), totals])

    base, row = [seed_stats() for _ in range(5)], [seed_stats() for _ in range(5)]
    start = time.perf_counter()
    paired_bleu_stats(base, row, n_boot=1000)
    assert time.perf_counter() - start < 1.0


@pytest.fixture(scope="module")
def nll():
    rng = np.random.default_rng(5)
    tokens = rng.integers(5, 40, size=400).astype(float)
    base = [tokens * rng.uniform(1.5, 2.5, size=400) for _ in range(3)]
    return tokens, base


def test_paired_ppl_lower_nll_is_significantly_lower_ppl(nll):
    tokens, base = nll
    row = [b * 0.9 for b in base]
    res = paired_ppl(base, row, tokens)
    expected = np.mean([math.exp(r.sum() / tokens.sum()) for r in row]) - np.mean([math.exp(b.sum() / tokens.sum()) for b in base])
    assert res.delta == pytest.approx(expected)
    assert res.delta < 0 and res.p_value < 0.01
    assert res.high < 0


def test_paired_ppl_identical_is_not_significant(nll):
    tokens, base = nll
    res = paired_ppl(base, base, tokens)
    assert res.delta == 0.0 and res.p_value == 1.0
    assert res.low <= 0 <= res.high


def test_paired_ppl_stats_equals_paired_ppl_and_allows_each_system_its_tokens(nll):
    tokens, base = nll
    row = [b * 0.9 for b in base]
    as_stats = paired_ppl_stats([ppl_stats(b, tokens) for b in base], [ppl_stats(r, tokens) for r in row])
    assert as_stats == paired_ppl(base, row, tokens)
    assert corpus_ppl(ppl_stats(base[0], tokens)) == pytest.approx(math.exp(base[0].sum() / tokens.sum()))
    finer = paired_ppl_stats([ppl_stats(b, tokens) for b in base], [ppl_stats(b, 2 * tokens) for b in base])  # same NLL, twice the tokens
    assert finer.delta == pytest.approx(np.mean([math.exp(b.sum() / (2 * tokens.sum())) - math.exp(b.sum() / tokens.sum()) for b in base]))
    with pytest.raises(ValueError, match="3 NLL values for 2 token counts"):
        ppl_stats([1.0, 2.0, 3.0], [1, 2])


# --- multiple comparisons, power, verdicts ------------------------------------------------------------------


def test_holm_worked_example():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_is_monotone_in_p_and_capped_at_one():
    raw = list(np.random.default_rng(3).uniform(0, 0.6, size=12))
    adj = holm(raw)
    order = np.argsort(raw)
    assert all(np.diff(np.array(adj)[order]) >= 0)
    assert all(a >= r for a, r in zip(adj, raw))
    assert max(adj) <= 1.0 and holm([0.5, 0.6]) == [1.0, 1.0]


def test_holm_skips_rows_without_a_test():
    assert holm([None, 0.01, None, 0.04]) == pytest.approx([None, 0.02, None, 0.04])
    assert holm([0.01, float("nan")])[1] is None
    assert holm([]) == [] and holm([None]) == [None]


def test_mde_formula():
    assert mde(1.0) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert mde(0.5) == pytest.approx(mde(1.0) / 2)
    assert mde(1.0, alpha=0.05, m=5) == pytest.approx(st.norm.ppf(1 - 0.005) + st.norm.ppf(0.8))
    assert mde(1.0, m=5) > mde(1.0) and mde(1.0, power=0.9) > mde(1.0)
    assert mde(None) is None


@pytest.mark.parametrize(
    "args, expected",
    [
        ((0.8, 0.001, 0.5, BLEU_TIE), AGREE),
        ((-0.8, 0.001, -0.5, BLEU_TIE), AGREE),
        ((0.8, 0.001, -0.5, BLEU_TIE), DISAGREE),
        ((-3.0, 0.01, 0.4, PPL_TIE), DISAGREE),
        ((0.8, 0.2, 0.5, BLEU_TIE), INCONCLUSIVE),
        ((0.8, None, 0.5, BLEU_TIE), INCONCLUSIVE),
        ((0.8, 0.001, 0.0, BLEU_TIE), NO_CHANGE),
        ((0.8, 0.001, 25.9 - 25.9, BLEU_TIE), NO_CHANGE),
        ((0.8, 0.001, 4.92 - 4.92, PPL_TIE), NO_CHANGE),
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


def test_verdict_on_a_bootstrap_result(boot):
    raw = [boot[k] for k in ("better", "one_better")]
    adj = holm([r.p_value for r in raw])
    got = [verdict(r.delta, p, 1.0, BLEU_TIE, interval=(r.low, r.high)) for r, p in zip(raw, adj)]
    assert got == [AGREE, INCONCLUSIVE]


def test_count_verdicts():
    counts = count_verdicts([("A", AGREE), ("A", INCONCLUSIVE), ("B", AGREE), ("A", AGREE), ("C", NO_PAPER)])
    assert list(counts.by_group) == ["A", "B", "C"]
    assert counts.by_group["A"] == {**dict.fromkeys(VERDICTS, 0), AGREE: 2, INCONCLUSIVE: 1}
    assert counts.overall == {AGREE: 3, DISAGREE: 0, INCONCLUSIVE: 1, NO_CHANGE: 0, NO_PAPER: 1}
    assert count_verdicts([]).overall == dict.fromkeys(VERDICTS, 0)
    with pytest.raises(ValueError):
        count_verdicts([("A", "maybe")])


# --- rank correlation with the paper ------------------------------------------------------------------------


def test_spearman_perfect_ranks():
    rho, low, high = spearman_with_interval([1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 20.0, 25.0, 40.0, 41.0])
    assert rho == pytest.approx(1.0) and low == pytest.approx(1.0) and high == pytest.approx(1.0)


def test_spearman_matches_scipy_and_interval_contains_it():
    rng = np.random.default_rng(9)
    paper = rng.normal(size=12)
    ours = paper + rng.normal(scale=0.7, size=12)
    rho, low, high = spearman_with_interval(ours, paper)
    assert rho == pytest.approx(st.spearmanr(ours, paper).statistic)
    assert -1 <= low < rho < high <= 1
    assert spearman_with_interval(ours, paper, seed=1) != (rho, low, high)


def test_spearman_drops_missing_rows_and_needs_three():
    assert spearman_with_interval([1.0, 2.0], [1.0, 2.0]) == (None, None, None)
    assert spearman_with_interval([1.0, 2.0, 3.0, 4.0], [1.0, None, 3.0, float("nan")]) == (None, None, None)
    rho, _, _ = spearman_with_interval([1.0, 2.0, 3.0, 9.0], [1.0, None, 3.0, 2.0])
    assert rho == pytest.approx(st.spearmanr([1, 3, 9], [1, 3, 2]).statistic)
    assert spearman_with_interval([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) == (None, None, None)
