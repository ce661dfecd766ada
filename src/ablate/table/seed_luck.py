"""Do seeds share luck across rows? A seed fixes a run's initialisation and data order, and every row of a study
runs the same seeds, so a seed that draws a good run in the base may draw good runs in the other rows too.

The paired test takes a row's seeds and the base's as independent. Shared luck (r > 0) makes it conservative: a
seed-matched design would see smaller effects. Opposite luck (r < 0) would make its intervals too narrow. This
measures which: a run's score less its row's mean, against the base's run of the same seed less the base's mean,
pooled over rows; the p-value permutes the seeds within each row, so row effects and the few distinct base seeds
(the same base run stands beside every row's run of its seed) are kept as they are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

MIN_RUNS = 4  # matched runs, in rows of at least 2, below which no correlation is worth printing


@dataclass(frozen=True)
class SeedLuck:
    r: float  # Pearson's r of the residuals, matched by seed
    p: float  # two-sided, from `permutations` within-row permutations of the seeds (never 0)
    runs: int  # matched runs counted (rows' runs whose seed the base also ran)
    rows: int
    permutations: int


def seed_luck(
    rows: Mapping[str, Mapping[int, float]], base: Mapping[int, float], permutations: int = 10_000, seed: int = 0
) -> SeedLuck | None:
    """`rows`: row -> seed -> score (the base left out); `base`: seed -> score. None with fewer than MIN_RUNS
    matched runs in rows of 2 or more, or when the residuals do not vary on one side."""
    scores = {s: v for s, v in base.items() if _finite(v)}
    if len(scores) < 2:
        return None
    base_mean = sum(scores.values()) / len(scores)
    blocks = []  # per row: (base residuals, row residuals) over the seeds both ran
    for runs in rows.values():
        matched = sorted(s for s, v in runs.items() if s in scores and _finite(v))
        if len(matched) >= 2:
            ys = np.array([runs[s] for s in matched], dtype=float)
            blocks.append((np.array([scores[s] - base_mean for s in matched]), ys - ys.mean()))
    n = sum(len(x) for x, _ in blocks)
    if n < MIN_RUNS:
        return None
    x = np.concatenate([b[0] for b in blocks])
    x -= x.mean()
    if not np.any(x) or not any(np.any(y) for _, y in blocks):
        return None
    rng = np.random.default_rng(seed)
    shuffled = np.concatenate([rng.permuted(np.tile(y, (permutations, 1)), axis=1) for _, y in blocks], axis=1)
    y = np.concatenate([b[1] for b in blocks])
    scale = math.sqrt(float(x @ x) * float(y @ y))  # permuting within rows keeps y's norm, and its mean at 0
    r, null = float(x @ y) / scale, shuffled @ x / scale
    p = (1 + int(np.sum(np.abs(null) >= abs(r) - 1e-12))) / (1 + permutations)
    return SeedLuck(r=r, p=p, runs=n, rows=len(blocks), permutations=permutations)


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)
