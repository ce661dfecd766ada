"""Do seeds share luck across rows? A seed fixes a run's initialisation and data order, and every row of a study
runs the same seeds, so a seed that draws a good run in the base may draw good runs in the other rows too.

The paired test takes a row's seeds and the base's as independent. Shared luck (r > 0) makes it conservative: a
seed-matched design would detect smaller effects. Opposite luck (r < 0) would make its intervals too narrow. This
measures which: a run's score less its row's mean, against the base's run of the same seed less the mean of the
base's runs of the row's seeds, pooled over rows; the p-value permutes the seeds within each row, so row effects
and the few distinct base seeds (the same base run stands beside every row's run of its seed) are kept as they are.
A row that changes the shapes of the weights draws other initial weights from the same seed (the data order stays),
so the pooled r is an average over rows that may share more or less.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from ablate.table.replicates import group_of
from ablate.table.score_kinds import METRICS, finite
from ablate.table.wording import count, p_words

MIN_RUNS = 4  # matched runs, in rows of at least 2, below which no correlation is worth printing


@dataclass(frozen=True)
class SeedLuck:
    r: float  # Pearson's r of the residuals, matched by seed
    p: float  # two-sided, from `permutations` within-row permutations of the seeds (never 0)
    runs: int  # matched runs counted (rows' runs whose seed the base also ran)
    rows: int
    base_seeds: int  # the base's runs they are matched with: all the evidence on the base's side
    permutations: int


def seed_luck(
    rows: Mapping[str, Mapping[int, float]], base: Mapping[int, float], permutations: int = 10_000, seed: int = 0
) -> SeedLuck | None:
    """`rows`: row -> seed -> score (the base left out); `base`: seed -> score. None with fewer than MIN_RUNS
    matched runs in rows of 2 or more, or when the residuals do not vary on one side."""
    scores = {s: v for s, v in base.items() if finite(v)}
    if len(scores) < 2:
        return None
    blocks = []  # per row: (base residuals, row residuals) over the seeds both ran
    used: set[int] = set()
    for runs in rows.values():
        matched = sorted(s for s, v in runs.items() if s in scores and finite(v))
        if len(matched) >= 2:
            used.update(matched)
            xs, ys = (np.array([d[s] for s in matched], dtype=float) for d in (scores, runs))
            blocks.append((xs - xs.mean(), ys - ys.mean()))  # both about this row's seeds: a within-row correlation
    n = sum(len(x) for x, _ in blocks)
    if n < MIN_RUNS:
        return None
    x = np.concatenate([b[0] for b in blocks])
    if not np.any(x) or not any(np.any(y) for _, y in blocks):
        return None
    rng = np.random.default_rng(seed)
    shuffled = np.concatenate([rng.permuted(np.tile(y, (permutations, 1)), axis=1) for _, y in blocks], axis=1)
    y = np.concatenate([b[1] for b in blocks])
    scale = math.sqrt(float(x @ x) * float(y @ y))  # permuting within rows keeps y's norm, and its mean at 0
    r, null = float(x @ y) / scale, shuffled @ x / scale
    p = (1 + int(np.sum(np.abs(null) >= abs(r) - 1e-12))) / (1 + permutations)
    return SeedLuck(r=r, p=p, runs=n, rows=len(blocks), base_seeds=len(used), permutations=permutations)


# -- in `ablate table`: measured from the study's table, read in its notes ------------------------------------------


def measure(table, metric: str, seed: int) -> dict | None:
    """Whether the rows' runs of a seed score as the base's run of that seed does (`seed_luck`), or None, from `table`
    (ablate.table.compare.Table). Runs that trained as members are left out: a member's data order is its group's,
    and members of one group are no independent draws for the permutation test."""
    by_seed = {
        row.name: {r.config["seed"]: getattr(r, metric) for r in row.runs if r.config.get("seed") is not None and group_of(r) is None}
        for row in table.rows
    }
    ablations = {k: v for k, v in by_seed.items() if k != table.base.name and k not in table.controls}
    luck = seed_luck(ablations, by_seed[table.base.name], seed=seed)
    return None if luck is None else asdict(luck)


def lines(s: dict) -> list[str]:
    """Whether seeds share luck across rows (`ablate.table.seed_luck`), and what that says of the paired test."""
    measured = {m: luck for m, luck in (s.get("seed_luck") or {}).items() if luck}
    if not measured:
        return []

    def read(m: str, luck: dict) -> str:
        p = p_words(luck["p"])
        if luck["p"] > s["bootstrap"]["alpha"]:
            meaning = f"no sign of shared or opposite luck (a weak test on {count(luck['base_seeds'], 'base seed')})"
        elif luck["r"] > 0:
            meaning = "seeds share luck, on average over rows, so the paired test, taking them as independent, tends to be conservative"
        else:
            meaning = (
                "seeds have opposite luck, on average over rows, so the paired test, taking them as independent, tends to be too narrow"
            )
        where = f"{luck['runs']} runs in {count(luck['rows'], 'row')} against {count(luck['base_seeds'], 'base seed')}"
        return f"{METRICS[m].label} r = {luck['r']:+.2f} ({p}; {where}): {meaning}"

    return [
        "Seeds across rows: a run's score less its row's mean against the base's run of the same seed less the mean of "
        "the base's runs of the row's seeds (p: seeds permuted within rows): "
        + "; ".join(read(m, luck) for m, luck in measured.items())
        + "."
    ]
