"""What `ablate table` knows of each score it reports, in one place: its name in the columns and notes, its range
(BLEU 0-100, perplexity from 1), the paper's printed precision (and so the tie below which a paper Δ is 0), which
direction is better, and the key a run logs it under. Columns, notes, tests and verdicts loop over METRICS and ask
these, rather than branch on a score's name."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    label: str  # as columns and notes name it
    bounds: tuple[float, float]  # what the score can be: a seed interval is cut to it
    digits: int | None = None  # the decimals the paper prints it to; None: not a score of the paper's
    higher_is_better: bool = True
    log_key: str | None = None  # a run's metrics.csv column

    @property
    def tie(self) -> float:
        """Half the paper's last printed digit: a paper Δ below it printed as 0 (BLEU 0.05, PPL 0.005)."""
        return 0.5 / 10**self.digits

    def paper_format(self, signed: bool = False) -> str:
        """The format spec of the paper's own figures: its precision, a sign for a Δ."""
        return f"{'+' if signed else ''}.{self.digits}f"


# The scores the paper reports, each row tested and given a verdict on (in column order).
METRICS = {
    "bleu": Metric("BLEU", (0.0, 100.0), digits=1, higher_is_better=True, log_key="val/bleu"),
    "ppl": Metric("PPL", (1.0, math.inf), digits=2, higher_is_better=False, log_key="val/ppl"),
}
# Every score with a seed interval: the paper's, and BLEU on sentences longer than any trained on.
SCORES = {**METRICS, "long_bleu": Metric("long BLEU", (0.0, 100.0))}


def finite(v: float | None) -> bool:
    """A number to count: not missing, not NaN or infinite."""
    return v is not None and math.isfinite(v)
