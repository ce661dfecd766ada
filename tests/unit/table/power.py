"""The power of the paired test computed forward, to check the MDE against: the rate at which a two-sided t test at
alpha/m rejects when the true Δ is `effect` standard errors (noncentral t at df; normal at df = inf)."""

from __future__ import annotations

import math

from scipy import stats as st


def rejection_rate(effect: float, df: float | None, m: int = 1, alpha: float = 0.05) -> float:
    df = math.inf if df is None else df
    crit = st.t.ppf(1 - alpha / (2 * m), df)
    if math.isinf(df):
        return float(st.norm.sf(crit - effect) + st.norm.cdf(-crit - effect))
    return float(st.nct.sf(crit, df, effect) + st.nct.sf(crit, df, -effect))
