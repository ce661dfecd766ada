"""Seed luck across rows: the residual correlation and its within-row permutation p-value, against crafted studies
and an exact enumeration of the permutations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ablate.table.seed_luck import seed_luck

BASE = {1: 30.0, 2: 28.0, 3: 32.0, 4: 31.0, 5: 29.0}
LUCK = {s: v - 30.0 for s, v in BASE.items()}  # each seed's luck, as the base shows it


def rows_with(luck_sign: float, noise: float = 0.0, seeds=(1, 2, 3), n_rows: int = 6, rng_seed: int = 0) -> dict:
    rng = np.random.default_rng(rng_seed)
    return {f"row{i}": {s: 25.0 + i + luck_sign * LUCK[s] + noise * rng.standard_normal() for s in seeds} for i in range(n_rows)}


def test_rows_that_share_the_bases_seed_luck_correlate_and_the_test_sees_it():
    luck = seed_luck(rows_with(+1.0, noise=0.2), BASE)
    assert luck.r > 0.95 and luck.p < 0.01
    assert (luck.runs, luck.rows, luck.base_seeds, luck.permutations) == (18, 6, 3, 10_000)


def test_opposite_luck_is_a_negative_correlation_and_as_significant():
    luck = seed_luck(rows_with(-1.0, noise=0.2), BASE)
    assert luck.r < -0.95 and luck.p < 0.01


def test_luck_of_their_own_is_no_correlation():
    rows = {"a": {1: 32.0, 2: 29.0, 3: 29.0}, "b": {1: 28.0, 2: 31.0, 3: 31.0}}  # residuals orthogonal to the base's (0, -2, +2)
    luck = seed_luck(rows, BASE)
    assert luck.r == pytest.approx(0.0, abs=1e-12) and luck.p == 1.0


def test_the_p_value_matches_an_exact_enumeration_of_the_within_row_permutations():
    rows = rows_with(+1.0, noise=1.5, n_rows=2, rng_seed=3) | {"row9": {1: 20.0, 2: 21.5, 4: 19.0, 5: 20.5}}
    luck = seed_luck(rows, BASE, permutations=20_000)
    blocks = [(np.array([BASE[s] for s in sorted(r)]), np.array([r[s] for s in sorted(r)])) for r in rows.values()]
    x = np.concatenate([b - b.mean() for b, _ in blocks])  # within rows: each row about its own seeds, on both sides

    def r_of(ys):
        y = np.concatenate([y - y.mean() for y in ys])
        return np.corrcoef(x, y)[0, 1]

    observed = r_of([y for _, y in blocks])
    null = [r_of([y[list(p)] for (_, y), p in zip(blocks, combo)]) for combo in itertools.product(
        *[itertools.permutations(range(len(y))) for _, y in blocks]
    )]  # fmt: skip
    exact = np.mean(np.abs(null) >= abs(observed) - 1e-12)
    assert luck.r == pytest.approx(observed)
    assert (luck.runs, luck.rows, luck.base_seeds) == (10, 3, 5) and len(null) == 6 * 6 * 24
    assert luck.p == pytest.approx(exact, abs=0.01)


def test_perfect_shared_luck_is_r_1_whatever_seeds_each_row_ran():
    """Each row is compared with the base's runs of its own seeds: rows on different seed sets lose nothing."""
    rows = {
        "a": {s: 20.0 + LUCK[s] for s in (1, 2, 3)},
        "b": {s: 40.0 + LUCK[s] for s in (3, 4, 5)},
        "c": {1: 25.0 + LUCK[1], 5: 25.0 + LUCK[5]},
    }
    luck = seed_luck(rows, BASE)
    assert luck.r == pytest.approx(1.0) and (luck.runs, luck.rows, luck.base_seeds) == (8, 3, 5)


def test_too_few_matched_runs_or_no_spread_give_nothing():
    assert seed_luck({"a": {1: 30.0, 2: 31.0}}, BASE) is None  # 2 matched runs
    assert seed_luck({"a": {1: 30.0, 7: 31.0, 8: 29.0}, "b": {2: 30.0, 9: 30.0}}, BASE) is None  # seeds the base lacks
    assert seed_luck({"a": {1: 30.0, 2: 30.0}, "b": {3: 29.0, 4: 29.0}}, BASE) is None  # rows' runs all alike
    assert seed_luck(rows_with(+1.0), {1: 30.0}) is None  # one base seed: no luck to measure
    assert seed_luck({"a": {1: 30.0, 2: float("nan"), 3: 31.0}, "b": {1: 1.0}}, BASE) is None  # NaN left out
