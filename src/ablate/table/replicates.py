"""A row's replicates: what its intervals and tests count as independent draws. A run trained alone is one. The
members of one group (members.size > 1) are one together, scored by their mean: they walk the group's length
schedule, whose effect every member shares (measured: docs/members.md), so counting each member once would put an
interval over one group's seeds at a fraction of the width that independent runs give. A row's seeds in G groups are
G replicates, and one group alone gives a mean with no interval of its own.

Replicates are treated as exchangeable: a row that mixes lone runs with groups, or groups of different sizes,
weighs each replicate equally, though a group's mean varies less than one run's score.

Groups that walk the same schedule (`members.schedule`, the group's seed, over the same batches) in a row and in the
base are shifted alike by it (measured: docs/members.md), so where every group of a row has its schedule's group in
the base, the test pairs them (`schedule_pairs`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def group_of(run) -> str | None:
    """The member group a run trained in, or None for a run that trained alone: its `members.group`; for an `ablate
    train --members` member (a sweep's lies apart from its group, in its trial's folder) with the folder it sits in,
    so a group moved aside (`--move-aside` renames the folder; its members' configs still name the old one) is
    another group than the one trained after it, and members copied together from two groups stay two."""
    cfg = run.config
    if (cfg.get("members.size") or 1) > 1 and cfg.get("members.group") is not None:
        if cfg.get("sweep.row") is None and getattr(run, "run_dir", None) is not None:
            return f"{cfg['members.group']} in {Path(run.run_dir).resolve().parent}"
        return str(cfg["members.group"])
    return None


# Beside its seed, a group's length schedule (ablate.data.member_sampler draws an order of length classes of the
# corpus's token buckets) is made by the training corpus, its tokenizer and batches (every data.* key but these) and
# members.data: groups that differ in one of them walk other schedules under the same seed.
NOT_SCHEDULE = ("data.dir", "data.cache_dir", "data.num_workers", "data.pad_multiple", "data.valid_prefix", "data.test_prefix",
                "data.max_dropped_share")  # fmt: skip


def schedule_of(run) -> tuple | None:
    """The length schedule a member's group walked: its seed (`members.schedule`) with what shapes the schedule; None
    for a lone run, or a member saved before ablate recorded the seed."""
    seed = run.config.get("members.schedule") if group_of(run) is not None else None
    if seed is None:
        return None
    shaping = sorted((k, repr(v)) for k, v in run.config.items() if k.startswith("data.") and k not in NOT_SCHEDULE)
    return (seed, run.config.get("members.data"), *shaping)


def schedule_pairs(row_runs: Sequence, base_runs: Sequence) -> tuple[list[int], list[int | None]] | None:
    """A test paired by schedule: (each row run's replicate, each base run's replicate or None to leave it out), the
    replicates numbered by schedule alike on both sides; None unless every run of both trained in a group with a
    recorded schedule, a schedule is one group a side, and the row has 2 or more, each also in the base (the base's
    groups on other schedules are left out of the pairing)."""
    runs = [*row_runs, *base_runs]
    if not runs or any(schedule_of(r) is None for r in runs):
        return None
    groups: dict[tuple[int, int], set[str]] = {}
    for side, side_runs in enumerate((row_runs, base_runs)):
        for r in side_runs:
            groups.setdefault((side, schedule_of(r)), set()).add(group_of(r))
    if any(len(g) > 1 for g in groups.values()):  # two groups on one schedule in a row: no one-to-one pairing
        return None
    schedules = sorted({schedule_of(r) for r in row_runs}, key=lambda s: (s[0], repr(s[1:])))
    if len(schedules) < 2 or any((1, s) not in groups for s in schedules):
        return None
    number = {s: k for k, s in enumerate(schedules)}
    return [number[schedule_of(r)] for r in row_runs], [number.get(schedule_of(r)) for r in base_runs]


def replicate_index(runs: Sequence) -> list[int]:
    """Each run's replicate, numbered 0, 1, ... in order of first appearance: a lone run its own, a group's members
    (of this row) one together."""
    seen: dict[object, int] = {}
    return [seen.setdefault(group_of(run) or ("alone", i), len(seen)) for i, run in enumerate(runs)]


def replicate_means(scores: np.ndarray, index: Sequence[int] | None) -> np.ndarray:
    """Per-run scores (runs first: shape (runs,) or (runs, ...)) averaged per replicate, in replicate order; the
    scores unchanged where `index` is None or numbers the runs 0, 1, ... in their order. A permutation is reordered:
    schedule_pairs numbers replicates by schedule, so two sides whose groups each kept one run, listed in other
    orders, are still aligned schedule by schedule."""
    if index is None or list(index) == list(range(len(index))):
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
