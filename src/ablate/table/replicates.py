"""A row's replicates: what its intervals and tests count as independent draws. A run trained alone is one. The
members of one group (members.size > 1) are one together, scored by their mean: they walk the group's length
schedule, whose effect every member shares (measured: docs/members.md), so counting each member once would put an
interval over one group's seeds at a fraction of the width that independent runs give. A row's seeds in G groups are
G replicates, and one group alone gives a mean with no interval of its own.

Replicates are treated as exchangeable: a row that mixes lone runs with groups, or groups of different sizes,
weighs each replicate equally, though a group's mean varies less than one run's score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def group_of(run) -> str | None:
    """The member group a run trained in (its `members.group`), or None for a run that trained alone."""
    cfg = run.config
    if (cfg.get("members.size") or 1) > 1 and cfg.get("members.group") is not None:
        return str(cfg["members.group"])
    return None


def replicate_index(runs: Sequence) -> list[int]:
    """Each run's replicate, numbered 0, 1, ... in order of first appearance: a lone run its own, a group's members
    (of this row) one together."""
    seen: dict[object, int] = {}
    return [seen.setdefault(group_of(run) or ("alone", i), len(seen)) for i, run in enumerate(runs)]


def replicate_means(scores: np.ndarray, index: Sequence[int] | None) -> np.ndarray:
    """Per-run scores (runs first: shape (runs,) or (runs, ...)) averaged per replicate, in replicate order; the
    scores unchanged where `index` is None or every run is its own replicate."""
    if index is None or len(set(index)) == len(index):
        return scores
    idx = np.asarray(index)
    members = (idx[None, :] == np.arange(idx.max() + 1)[:, None]).astype(float)  # (replicates, runs)
    means = members @ scores.reshape(len(idx), -1) / members.sum(axis=1, keepdims=True)
    return means.reshape((members.shape[0], *scores.shape[1:]))


def replicate_values(runs: Sequence, attr: str) -> list[float]:
    """A score per replicate: the mean over its runs that have a finite one (a replicate without any is left out)."""
    index = replicate_index(runs)
    sums: dict[int, list[float]] = {}
    for run, k in zip(runs, index):
        value = getattr(run, attr)
        if value is not None and math.isfinite(value):
            sums.setdefault(k, []).append(value)
    return [sum(v) / len(v) for _, v in sorted(sums.items())]


def seeds_in_groups(runs: Sequence) -> str:
    """ "12 seeds in 3 groups", "5 seeds in 1 group and 2 alone", or "3 seeds" for a row with no member groups."""
    groups = {g for g in map(group_of, runs) if g is not None}
    alone = sum(group_of(run) is None for run in runs)
    seeds = f"{len(runs)} seed{'' if len(runs) == 1 else 's'}"
    if not groups:
        return seeds
    where = f"{len(groups)} group{'' if len(groups) == 1 else 's'}"
    return f"{seeds} in {where}" + (f" and {alone} alone" if alone else "")


def replicate_name(runs: Sequence) -> str:
    """What a row's replicate is, for a plan that counts them: "seeds", "groups of 4" (the row's groups all of one size)
    or "replicates" (lone runs and groups, or groups of several sizes)."""
    index = replicate_index(runs)
    sizes = {index.count(k) for k in set(index)}
    if not any(group_of(run) for run in runs):
        return "seeds"
    if all(group_of(run) for run in runs) and len(sizes) == 1:
        return f"groups of {sizes.pop()}"
    return "replicates"
