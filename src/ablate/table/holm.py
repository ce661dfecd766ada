"""Holm's correction: each row's paired test against base is one of the m tests of a metric, so the p-values are
adjusted over all rows of that metric (step-down, monotone, capped at 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1); None or NaN (a row without a test) gives None.

    One correction over all rows of a metric: each row is tested against base, so m grows with the sweep.
    """
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None and not math.isnan(p))
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        out[i] = running
    return out
