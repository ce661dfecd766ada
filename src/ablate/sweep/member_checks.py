"""Whether a sweep's rows can train as the members it asks for (`members: K`, a row's `members.size`, `ablate sweep
--members`): a search only over keys members may differ in, and no setting members cannot train with. Checked by
`ablate sweep` once `--members` is applied (which may set another K than the file's, or none), so a study is refused
before its first trial, naming the row or key, rather than failing every trial; and a note where a row's seeds
would be left in too few groups for a seed interval."""

from __future__ import annotations

import sys
from collections import Counter

from ablate.config.members import MEMBER_KEYS, setting_problem
from ablate.sweep.spec import Sweep


def members_problem(sweep: Sweep) -> str | None:
    """Why the sweep's rows cannot train as the members it asks for (member_search_problem, member_setting_problem):
    checked by `ablate sweep` once `--members` is applied, which may set another K than the file's or none."""
    return member_search_problem(sweep) or member_setting_problem(sweep)


def member_search_problem(sweep: Sweep) -> str | None:
    """A search grouped into members may only search keys members can differ in (the seed and the scalar knobs)."""
    if not sweep.search or (sweep.row_config({}).members.size == 1 and not sweep.members_auto):
        return None
    other = [key for key in sweep.search if key not in MEMBER_KEYS]
    if other:
        return (
            f"members: search key {other[0]} cannot differ between members of one model, so trials cannot be grouped; "
            f"search only {', '.join(MEMBER_KEYS)} with members, or set members: 1"
        )
    return None


def member_setting_problem(sweep: Sweep) -> str | None:
    """A row whose trials train as members (members.size > 1 and more than one seed; `members: auto` once resolved)
    under a setting members cannot train with (ablate.config.members.setting_problem), named with the row: refused
    before the study starts, not by every trial failing."""
    seeds = Counter(row for row, _ in sweep.rows())
    rows = {f"variant '{row}'": (o, seeds[row]) for row, o in sweep.variants.items()}
    seen: dict = {}
    for where, (overrides, seeds) in (rows or {"the search": ({}, sweep.n_trials or 2)}).items():
        cfg = sweep.row_config(overrides)
        if cfg.members.size == 1 or seeds < 2:  # trains alone
            continue
        if sweep.gpus_per_trial > 1:
            return f"{where}: members: gpus_per_trial {sweep.gpus_per_trial} cannot be combined with members (a group trains on one device)"
        problem = setting_problem(cfg) or _variants_problem(cfg, seen)
        if problem:
            return f"{where}: {problem}"
    return None


def _variants_problem(cfg, seen: dict) -> str | None:
    """member_problem for the row's variants, wired once per combination of them in `seen` (a 5,000-row file stays
    quick): only a variant's constructor decides whether it takes a member axis. Every built-in variant takes one
    (tests/unit/model/test_members.py), and a variant of one's own is a torch module: so where torch is not imported,
    no variant but the built-in ones is registered, nothing is wired, and the sweep stays free of torch."""
    if "torch" not in sys.modules:
        return None
    from ablate.model.build import member_problem

    m = cfg.model
    key = (m.attention, m.attention_scaling, m.positional, m.activation)
    if key not in seen:
        seen[key] = member_problem(m, cfg.data.vocab_size)
    return seen[key]


def few_groups_note(sweep: Sweep) -> str | None:
    """A note for a grid whose members leave a row's seeds in fewer than 4 groups: `ablate table` counts a group once
    (its members share a length schedule: docs/members.md), so 1 group gives the row no seed interval and 2-3 give a t
    interval on 1-2 degrees of freedom; None where every row has 4 or more, or trains its seeds as runs, and for a
    search (no rows)."""
    seeds = Counter(row for row, _ in sweep.rows())
    few = {}
    for row, n in seeds.items():
        size = sweep.row_config(sweep.variants[row]).members.size
        groups = -(-n // size)
        if size > 1 and n > 1 and groups < 4:
            few[row] = (n, size, groups)
    if not few:
        return None
    # ceil(n / K) is the fewest: workers racing for a row's seeds may form smaller groups, and more of them.
    shown = ", ".join(f"{row} ({n} seeds in as few as {g} group{'' if g == 1 else 's'} of {k})" for row, (n, k, g) in few.items())
    return (
        f"members: {shown}. ablate table counts a group once, by its members' mean (they share its length schedule: "
        "docs/members.md): a row in 1 group gets no seed interval, in 2-3 a wide one; members of at most a quarter of "
        "a row's seeds give it 4 groups"
    )
