"""How often `ablate table`'s paired test rejects a true null: a row and base drawn alike, with the seed spread and
seed counts a study may have. The README's rates for a one-seed row (borrowed seed variance) and for unequal
seed spreads come from here; equal spreads with 2-5 seeds each are tested in tests/unit/table/test_paired_bootstrap.py.

    python benchmarks/null_rates.py [--studies 1000]

Each simulated study scores 150 sentences (token counts 5-29, a shared per-sentence difficulty) for every seed of
both systems; a seed shifts its system's NLL per token by a normal draw of sd `seed sd`, and each sentence adds
its own noise of sd 0.01. The test runs on PPL (`paired_ppl_stats`, 200 resamples).
"""

from __future__ import annotations

import argparse

import numpy as np

from ablate.table.corpus_scores import ppl_stats
from ablate.table.paired_bootstrap import paired_ppl_stats

SCENARIOS = [  # (what, row seeds, base seeds, row seed sd, base seed sd)
    ("one-seed row, equal spread", 1, 5, 0.04, 0.04),
    ("one-seed row, 2.5x the base's seed sd", 1, 5, 0.10, 0.04),
    ("2 row seeds, 5x the base's seed sd", 2, 5, 0.15, 0.03),
    ("3 seeds each, equal spread", 3, 3, 0.04, 0.04),
]


def _system(rng: np.random.Generator, tokens: np.ndarray, difficulty: np.ndarray, seeds: int, sd: float) -> list[np.ndarray]:
    """One system's per-seed PPL statistics: a shift of sd `sd` per seed, sentence noise of sd 0.01."""
    return [ppl_stats(tokens * (2.0 + difficulty + rng.normal(0, sd) + rng.normal(0, 0.01, tokens.size)), tokens) for _ in range(seeds)]


def rejection_rates(n_row: int, n_base: int, row_sd: float, base_sd: float, studies: int) -> tuple[float, float]:
    """Shares of `studies` null studies with p <= 0.05 and p <= 0.01."""
    rng = np.random.default_rng(1)
    p = []
    for k in range(studies):
        tokens = rng.integers(5, 30, size=150).astype(float)
        difficulty = rng.normal(0, 0.3, size=150)
        base, row = _system(rng, tokens, difficulty, n_base, base_sd), _system(rng, tokens, difficulty, n_row, row_sd)
        p.append(paired_ppl_stats(base, row, n_boot=200, seed=k).p_value)
    p = np.asarray(p)
    return float(np.mean(p <= 0.05)), float(np.mean(p <= 0.01))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=1000, help="null studies per scenario (default: 1000)")
    args = parser.parse_args()
    print(f"{'scenario':40} {'p<=0.05':>8} {'p<=0.01':>8}   ({args.studies} null studies each)")
    for what, *setting in SCENARIOS:
        at05, at01 = rejection_rates(*setting, studies=args.studies)
        print(f"{what:40} {at05:8.3f} {at01:8.3f}", flush=True)


if __name__ == "__main__":
    main()
