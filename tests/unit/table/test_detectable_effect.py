"""How many seeds a study needs: the paired test's noise split by source (`paired_bootstrap.Noise`) reproduces the test,
predicts a test with more seeds, `detectable_effect.mde` is the effect the test finds with 80% power (checked forward,
by the noncentral t), and `seeds_for_mde` finds the fewest seeds for a target (hand values, scipy)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from power import rejection_rate
from scipy import stats as st

from ablate.table.corpus_scores import ppl_stats
from ablate.table.detectable_effect import mde, seeds_for_mde
from ablate.table.paired_bootstrap import Noise, paired_ppl_stats


def _systems(rng, n_row, n_base, seed_sd=0.05, sentence_sd=0.3, gain_sd=0.0, size=150):
    """Row and base on shared sentences: a per-seed offset of sd `seed_sd` (a seed better everywhere),
    per-seed-and-sentence noise of sd `sentence_sd` (the seed-by-sentence part), and the row's own per-sentence
    gain of sd `gain_sd`, the same in every seed (what sampling other sentences would change)."""
    tokens, difficulty = rng.integers(5, 30, size=size).astype(float), rng.normal(0, 0.3, size=size)
    gain = rng.normal(0, gain_sd, size=size)

    def system(n, shift):
        return [
            ppl_stats(tokens * (2.0 + difficulty + shift + rng.normal(0, seed_sd) + rng.normal(0, sentence_sd, size=size)), tokens)
            for _ in range(n)
        ]

    return system(n_base, 0.0), system(n_row, gain)


def test_the_noise_at_the_tests_own_seeds_is_the_test():
    base, row = _systems(np.random.default_rng(1), 3, 5, seed_sd=0.2, gain_sd=0.3)
    res = paired_ppl_stats(base, row, n_boot=500)
    assert (res.noise.n_row, res.noise.n_base) == (3, 5) and res.noise.sentences > 0  # nothing floored at 0
    var, df = res.noise.at(3, 5)
    assert var == pytest.approx(res.se**2, rel=1e-9) and df == pytest.approx(res.df, rel=1e-9)


@pytest.mark.parametrize("gain_sd", [0.0, 0.3], ids=["seed noise only", "and a per-sentence gain"])
def test_the_noise_of_a_few_seeds_predicts_the_test_with_many(gain_sd):
    """Var(Δ) projected from 3 + 3 seeds to 12 + 12 against the SE² of tests that ran 12 + 12 (means over 30 studies
    each): within 25%, where the 3-seed SE² itself is off by 2-4x. With a per-sentence gain, half of the 12-seed
    variance is the sentences' own, which the plan must keep undivided."""
    rng = np.random.default_rng(2)
    projected, measured, kept, sentences = [], [], [], []
    for k in range(30):
        few = paired_ppl_stats(*_systems(rng, 3, 3, gain_sd=gain_sd), n_boot=200, seed=k)
        projected.append(few.noise.at(12, 12)[0])
        kept.append(few.se**2)
        sentences.append(few.noise.sentences)
        measured.append(paired_ppl_stats(*_systems(rng, 12, 12, gain_sd=gain_sd), n_boot=200, seed=k).se ** 2)
    ratio = np.mean(projected) / np.mean(measured)
    assert 0.75 <= ratio <= 1.25, ratio
    assert np.mean(kept) / np.mean(measured) > 1.8  # what the projection corrects for
    share = np.mean(sentences) / np.mean(measured)
    assert share > 0.3 if gain_sd else share < 0.1, share


def test_one_seed_systems_have_no_noise_to_plan_from():
    base, row = _systems(np.random.default_rng(3), 1, 5)
    assert paired_ppl_stats(base, row, n_boot=100).noise is None


def _by_hand(noise: Noise, target: float, m: int = 1) -> int | None:
    """The fewest n whose test finds a Δ of `target` with 80% power, SE² = sentences + row/n + base/n_b, Welch df."""
    for n in range(2, 101):
        nb = max(n, noise.n_base)
        a, b = noise.row / n, noise.base / nb
        var = noise.sentences + a + b
        df = max(var**2 / (a**2 / (n - 1) + b**2 / (nb - 1)), min(n, nb) - 1)
        if rejection_rate(target / math.sqrt(var), df, m) >= 0.8:
            return n
    return None


def test_seeds_for_mde_hand_value():
    """Seed variance 1 in each system, no sentence noise: df = 2(n - 1) and SE = sqrt(2 / n). A Δ of 1 is found with
    78.1% power at n = 16 (df 30) and 80.7% at n = 17 (df 32)."""
    plan = seeds_for_mde(Noise(0.0, 1.0, 1.0, 3, 3), target=1.0)
    assert plan.seeds == 17 and plan.floor == 0.0 and plan.target == 1.0
    assert rejection_rate(1.0 / math.sqrt(2 / 16), 30) == pytest.approx(0.7814, abs=1e-4)
    assert rejection_rate(1.0 / math.sqrt(2 / 17), 32) == pytest.approx(0.8070, abs=1e-4)


@pytest.mark.parametrize(
    "noise",
    [Noise(0.0, 1.0, 1.0, 3, 3), Noise(0.01, 0.5, 2.0, 3, 5), Noise(0.02, 0.4, 0.4, 2, 20), Noise(0.05, 3.0, 0.2, 3, 5)],
)
@pytest.mark.parametrize("m", [1, 12])
def test_seeds_for_mde_matches_the_formula(noise, m):
    plan = seeds_for_mde(noise, target=1.0, m=m)
    assert plan.seeds == _by_hand(noise, 1.0, m)
    if plan.seeds is not None and plan.seeds > 2:
        var, df = noise.at(plan.seeds - 1, max(plan.seeds - 1, noise.n_base))
        assert mde(math.sqrt(var), m=m, df=df) > 1.0  # one seed fewer would not do


def test_seeds_beyond_the_bases_never_widen_the_mde_which_the_plans_bisection_rests_on():
    rng = np.random.default_rng(0)
    for parts in (1, 2, 2, 1, 2, 2):
        sentences, row, base = rng.uniform(0, 0.3), *rng.uniform(0.01, 5.0, 2)
        noise = Noise(sentences, row, base, 2, int(rng.integers(2, 12)), parts=parts)
        every = [mde(math.sqrt(var), m=12, df=df) for var, df in (noise.at(n, max(n, noise.n_base)) for n in range(2, 31))]
        beyond = every[noise.n_base - 2 :]
        assert all(b <= a * (1 + 1e-12) for a, b in zip(beyond, beyond[1:])), noise
        for target in (beyond[0] * 1.01, beyond[len(beyond) // 3], beyond[-1] * 1.01, beyond[-1] * 0.99, min(every[:3]) * 1.001):
            counted_up = next((n for n, x in enumerate(every, 2) if x <= target), None)
            assert seeds_for_mde(noise, target, m=12, most=30).seeds == counted_up, (noise, target)


def test_a_larger_base_and_fewer_rows_need_fewer_seeds():
    few_base, many_base = Noise(0.02, 0.5, 0.5, 3, 3), Noise(0.02, 0.5, 0.5, 3, 40)
    assert seeds_for_mde(many_base, 1.0).seeds < seeds_for_mde(few_base, 1.0).seeds
    assert seeds_for_mde(few_base, 1.0, m=1).seeds < seeds_for_mde(few_base, 1.0, m=12).seeds


def test_a_target_below_the_sentences_floor_takes_no_number_of_seeds():
    """Sentence variance 0.25 alone: MDE >= 0.5 x 2.80 = 1.40 however many seeds (2.80: the z quantiles' sum, less a
    hair for the far tail's rejections)."""
    plan = seeds_for_mde(Noise(0.25, 1.0, 1.0, 3, 3), target=1.0)
    assert plan.seeds is None and plan.floor == pytest.approx((st.norm.ppf(0.975) + st.norm.ppf(0.8)) * 0.5, rel=1e-5)
    assert rejection_rate(plan.floor / 0.5, None) == pytest.approx(0.8, abs=1e-9)
    assert seeds_for_mde(Noise(0.25, 1.0, 1.0, 3, 3), target=1.5).seeds is not None


def test_mde_is_the_effect_found_with_the_stated_power():
    """Forward: at the MDE the test rejects with 80% power, at every df; at few df that takes more than the textbook
    (t_{1-alpha/2m} + t_power) * SE, which gives 68-75% power at 2-5 df over 11 rows; at df = inf they are the same."""
    assert mde(1.0) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert mde(0.5) == pytest.approx(mde(1.0) / 2)
    assert mde(1.0, alpha=0.05, m=5) == pytest.approx(st.norm.ppf(1 - 0.005) + st.norm.ppf(0.8))
    assert mde(1.0, m=5) > mde(1.0) and mde(1.0, power=0.9) > mde(1.0)
    assert mde(None) is None
    for df in (1.0, 2.15, 4.6, 30.0, math.inf):
        for m, power in ((1, 0.8), (11, 0.8), (11, 0.9)):
            found = mde(1.0, m=m, power=power, df=df)
            assert rejection_rate(found, df, m) == pytest.approx(power, abs=1e-6), (df, m, power)
    textbook = st.t.ppf(1 - 0.05 / 22, 2.15) + st.t.ppf(0.8, 2.15)
    assert rejection_rate(textbook, 2.15, 11) < 0.7 and mde(1.0, m=11, df=2.15) > 1.15 * textbook


def test_a_plan_in_a_few_paired_groups_counts_their_dof_as_the_test_does():
    """A test paired by schedule over 2-4 groups reads the t at G - 1 dof; the plan read Welch-Satterthwaite's
    hundreds, and so said 2 groups reach an MDE the study's own 3 could not (a 2-pair test's MDE is 3x the plan's)."""
    rng = np.random.default_rng(4)
    base, row = _systems(rng, 6, 6, seed_sd=0.3, gain_sd=0.3)
    groups = [0, 0, 1, 1, 2, 2]
    test = paired_ppl_stats(base, row, n_boot=300, replicates=(groups, groups), by_schedule=True)
    assert test.seed_variance == "paired" and test.df == 2.0
    var, df = test.noise.at(3, 3)
    assert var == pytest.approx(test.se**2, rel=1e-9) and df == test.df
    assert test.noise.at(2, 2)[1] == 1.0 and test.noise.at(5, 5)[1] >= 4.0  # Welch-Satterthwaite from 5 groups on
    plan = seeds_for_mde(test.noise, target=mde(test.se, m=1, df=test.df) * 0.99)
    assert plan.seeds is None or plan.seeds > 3  # fewer groups than the test had never reach what it missed
