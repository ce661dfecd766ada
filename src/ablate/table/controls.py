"""Controls: the `base-…` rows, the base trained otherwise (e.g. `base-2x`, twice as long with the convergence rule
off). A control asks whether the study's protocol holds, not what an ablation does, so `ablate table` treats it
apart from the ablations:

- it is compared with the base's runs of its own seeds: a control of seed 2 against the base's run of seed 2, which
  started from the same weights and read the data in the same order (against the mean of all the base's seeds it
  would also carry seed 2's luck); where either trained as members of a group, whose order of batches is the
  group's and not its seed's, against the whole base;
- its paired tests form a Holm family of their own, so they neither make the ablations' correction stricter nor
  borrow from it;
- it has no verdict against the paper and stays out of the agreement counts and the seed-luck correlation.

A control is known by its name, as its group is (`ablate.config.paper.row_group`), not by the basis its runs record: a
Table 3 row the sweep excepts from the basis (`big`, trained for its own 300K steps) is still an ablation.
"""

from __future__ import annotations

from dataclasses import replace

from ablate.config.paper import BASE_VARIANTS
from ablate.table.replicates import group_of


def find_controls(rows: list, base) -> dict[str, object]:
    """Each control's name -> the base row it is compared with: the base's runs of the control's seeds when the base
    ran all of them as runs of their own, and so did the control, else the whole base."""
    out = {}
    for row in rows:
        if row is base or row.group != BASE_VARIANTS:
            continue
        seeds = {r.config.get("seed") for r in row.runs}
        matched = [r for r in base.runs if r.config.get("seed") in seeds]
        alone = not any(group_of(r) for r in [*row.runs, *matched])  # a member's data order is its group's, not its seed's
        out[row.name] = replace(base, runs=matched) if None not in seeds and len(matched) == len(seeds) and alone else base
    return out


def seeds_of(row) -> list:
    return sorted(r.config.get("seed") for r in row.runs)
