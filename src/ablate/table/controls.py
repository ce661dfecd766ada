"""Controls: rows whose runs record another comparison basis than the base's, such as the base trained twice as
long with the convergence rule off (a sweep file lists them under `basis.except`). A control asks whether the
study's basis holds, not what an ablation does, so `ablate table` treats it apart from the ablations:

- it is compared with the base's runs of its own seeds: a control of seed 2 against the base's run of seed 2, which
  started from the same weights and read the data in the same order, so only how it was trained differs (against
  the mean of all the base's seeds it would also carry seed 2's luck);
- its paired tests form a Holm family of their own, so they neither make the ablations' correction stricter nor
  borrow from it;
- it has no verdict against the paper and stays out of the agreement counts and the seed-luck correlation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace


def recorded_basis(row) -> str | None:
    """The basis most of the row's runs record in their summaries (None when none records one)."""
    counted = Counter(str(r.summary["basis"]) for r in row.runs if r.summary.get("basis"))
    return counted.most_common(1)[0][0] if counted else None


def find_controls(rows: list, base) -> dict[str, object]:
    """Each control's name -> the base row it is compared with: the base's runs of the control's seeds when the base
    ran all of them, else the whole base. A row is a control when any of its runs records a basis other than the
    base's; with no basis recorded by the base there is nothing to tell controls by, and none is found."""
    reference = recorded_basis(base)
    if reference is None:
        return {}
    out = {}
    for row in rows:
        if row is base or all(str(r.summary.get("basis") or reference) == reference for r in row.runs):
            continue
        seeds = {r.config.get("seed") for r in row.runs}
        matched = [r for r in base.runs if r.config.get("seed") in seeds]
        same_seeds = None not in seeds and len(matched) == len(seeds)
        out[row.name] = replace(base, runs=matched) if same_seeds else base
    return out


def seeds_of(row) -> list:
    return sorted(r.config.get("seed") for r in row.runs)
