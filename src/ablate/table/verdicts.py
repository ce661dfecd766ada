"""A verdict per row: does our Δ against base reproduce the paper's (agree, disagree, inconclusive, or inconclusive for
want of seeds; no change or no row in the paper), with the paper's printed precision as the tie; and the verdicts counted per group.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

AGREE, DISAGREE, INCONCLUSIVE = "agree", "disagree", "inconclusive"


NO_CHANGE, NO_PAPER = "paper: no change", "no paper row"
# The paper's Δ is 0 at its printed precision and ours differs (significant, as for agree/disagree): not agreement,
# which "paper: no change" alone would read as, nor a disagreement in sign, which a Δ of 0 has none to have.
NO_CHANGE_OURS_DIFFERS = "paper: no change; ours differs"
# A test with one seed (or one member group) on each side holds sentence noise only: a Δ beyond it may be one seed's
# luck, which no such test can tell from an effect (in simulated null studies with seed noise it "rejects" nearly
# always). So it settles no sign, and says why, apart from a plain inconclusive.
ONE_SEED = "inconclusive (one seed)"


VERDICTS = (AGREE, DISAGREE, INCONCLUSIVE, ONE_SEED, NO_CHANGE, NO_CHANGE_OURS_DIFFERS, NO_PAPER)


@dataclass(frozen=True)
class VerdictCounts:
    """How many rows got each verdict, per group and over all groups (every verdict present, zeros included)."""

    by_group: dict[str, dict[str, int]]
    overall: dict[str, int]


def verdict(
    delta: float | None,
    p_adj: float | None,
    paper_delta: float | None,
    tie: float,
    interval: tuple[float, float] | None = None,
    alpha: float = 0.05,
    seed_noise: bool = True,
) -> str:
    """Does our Δ against base reproduce the paper's? One of `VERDICTS`.

    "no paper row" and, where the paper's Δ is 0 at its printed precision (|paper Δ| < tie), "paper: no change" or,
    when our Δ is significant, "paper: no change; ours differs", are counted apart. Otherwise "agree"/"disagree" by
    sign when significant (Holm-adjusted p <= alpha and the interval, if given, excludes 0), else "inconclusive": a
    non-significant row says nothing about the sign. `seed_noise` False: the test held no seed variance (one seed or
    member group a side), so a Δ significant against sentence noise alone is "inconclusive (one seed)", not a sign.
    """
    if paper_delta is None:
        return NO_PAPER
    crosses = interval is not None and interval[0] <= 0.0 <= interval[1]
    significant = not (delta is None or p_adj is None or p_adj > alpha or crosses or delta == 0.0)
    if significant and not seed_noise:  # beyond sentence noise only: not "ours differs", nor a sign, nor "no change"
        return ONE_SEED
    if abs(paper_delta) < tie:
        return NO_CHANGE_OURS_DIFFERS if significant else NO_CHANGE
    if not significant:
        return INCONCLUSIVE
    return AGREE if (delta > 0) == (paper_delta > 0) else DISAGREE


def count_verdicts(rows: Iterable[tuple[str, str]]) -> VerdictCounts:
    """Tally (group, verdict) pairs per group and overall, in the order groups first appear."""
    by_group: dict[str, dict[str, int]] = {}
    overall = dict.fromkeys(VERDICTS, 0)
    for group, v in rows:
        if v not in overall:
            raise ValueError(f"unknown verdict {v!r}")
        by_group.setdefault(group, dict.fromkeys(VERDICTS, 0))[v] += 1
        overall[v] += 1
    return VerdictCounts(by_group, overall)
