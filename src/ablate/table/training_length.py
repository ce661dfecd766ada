"""Did the runs that trained longer score better? Within a row every run has the same configuration, so where a
stopping rule (convergence, early stopping) ended them after different numbers of updates, a score that still
rises with training length says the rule stopped them short of convergence: the row's spread then holds where the
rule fired as well as seed noise, and a row whose runs stop earlier on average is compared partly on length.

The slope is the pooled within-row least-squares fit of the score on log2(updates) (each row about its own means,
so row effects drop out): the change per doubling of training. Its interval and p are Student-t with n - rows - 1
degrees of freedom. It is a correlation: a run the rule stops late may be one that was still improving, so the
causal check is a control row trained longer (base-2x). Runs that trained equally long (a cap, a budget) add
nothing to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as st

from ablate.table import paired_bootstrap
from ablate.table.replicates import group_of
from ablate.table.score_kinds import METRICS, SCORES, finite
from ablate.table.wording import count, p_words

MIN_DF = 2  # residual degrees of freedom below which no slope is worth printing


@dataclass(frozen=True)
class TrainingLength:
    slope: float  # change in the score per doubling of updates, within rows
    low: float  # its 95% interval (`level`)
    high: float
    p: float  # two-sided, slope = 0
    r: float  # within-row Pearson r of the score and log2(updates)
    runs: int  # in the rows counted: those whose runs trained for different numbers of updates
    rows: int
    shortest: int  # updates, over the runs counted
    longest: int


def training_length(rows: Mapping[str, Sequence[tuple[float, float]]], level: float = 0.95) -> TrainingLength | None:
    """`rows`: row -> [(updates, score)] per run. None when fewer than MIN_DF residual degrees of freedom remain
    from rows of 2+ runs whose lengths differ, or when the scores do not vary about their rows' means."""
    blocks = []
    for runs in rows.values():
        kept = np.array([(u, v) for u, v in runs if finite(u) and u > 0 and finite(v)], dtype=float).reshape(-1, 2)
        if len(kept) >= 2 and np.ptp(kept[:, 0]) > 0:
            x, y = np.log2(kept[:, 0]), kept[:, 1]
            blocks.append((x - x.mean(), y - y.mean(), kept[:, 0]))
    n = sum(len(b[0]) for b in blocks)
    df = n - len(blocks) - 1
    if df < MIN_DF:
        return None
    x, y = (np.concatenate([b[i] for b in blocks]) for i in (0, 1))
    sxx, syy, sxy = float(x @ x), float(y @ y), float(x @ y)
    if syy == 0:
        return None
    slope = sxy / sxx
    se = math.sqrt(max(syy - slope * sxy, 0.0) / df / sxx)
    q = float(st.t.ppf(0.5 + level / 2, df))
    p = paired_bootstrap.two_sided_p(slope, se, df)
    updates = np.concatenate([b[2] for b in blocks])
    return TrainingLength(
        slope=slope,
        low=slope - q * se,
        high=slope + q * se,
        p=p,
        r=sxy / math.sqrt(sxx * syy),
        runs=n,
        rows=len(blocks),
        shortest=int(updates.min()),
        longest=int(updates.max()),
    )


# -- in `ablate table`: measured from the study's table, read in its notes ------------------------------------------


def measure(table, metric: str, seed: int = 0) -> dict | None:
    """Whether a row's runs that trained longer scored otherwise (`training_length`), the controls left out, or None.
    Runs that trained as members are left out too: a group's members share its schedule, so they are no independent
    points for the fit."""
    rows = {
        row.name: [(r.steps, getattr(r, metric)) for r in row.runs if group_of(r) is None]
        for row in table.rows
        if row.name not in table.controls
    }
    found = training_length(rows)
    return None if found is None else asdict(found)


def lines(s: dict) -> list[str]:
    """Whether runs a stopping rule let train longer scored otherwise (`ablate.table.training_length`)."""
    measured = {m: t for m, t in (s.get("training_length") or {}).items() if t}
    if not measured:
        return []
    alpha = s["bootstrap"]["alpha"]

    def where(t: dict) -> str:
        return f"{t['runs']} runs in {count(t['rows'], 'row')}, {t['shortest']:,}-{t['longest']:,} updates"

    same = len({where(t) for t in measured.values()}) == 1  # the usual case: said once

    def read(m: str, t: dict) -> str:
        p = p_words(t["p"])
        return f"{METRICS[m].label} {t['slope']:+.2f} [{t['low']:+.2f}, {t['high']:+.2f}] per doubling (r {t['r']:+.2f}, {p}" + (
            ")" if same else f"; {where(t)})"
        )

    better = [m for m, t in measured.items() if t["p"] <= alpha and (t["slope"] > 0) == SCORES[m].higher_is_better]
    worse = [m for m, t in measured.items() if t["p"] <= alpha and m not in better]
    if better:
        meaning = (
            f"runs that trained longer scored better ({', '.join(METRICS[m].label for m in better)}), as when a stopping rule ends "
            "runs short of convergence (a correlation: a control trained longer is the check): a row's spread then holds "
            "where the rule fired as well as seed noise, and rows that "
            "stopped sooner on average are compared partly on length (tighten the rule, or compare at equal updates: "
            "`ablate table --at-update N`)"
        )
    elif worse:
        meaning = f"runs that trained longer scored worse ({', '.join(METRICS[m].label for m in worse)}): the rule let some overtrain"
    else:
        meaning = "no sign that runs which trained longer scored otherwise"
    return [
        "Training length within rows (each row's runs stopped after different numbers of updates; the fit of the score "
        "on log2 updates about each row's means, 95% t interval"
        + (f"; {where(next(iter(measured.values())))}" if same else "")
        + "): "
        + "; ".join(read(m, t) for m, t in measured.items())
        + f": {meaning}."
    ]
