"""What a score can be: its range (BLEU and chrF 0-100, perplexity from 1), and whether a value is a number to count."""

from __future__ import annotations

import math

RANGES = {"bleu": (0.0, 100.0), "long_bleu": (0.0, 100.0), "ppl": (1.0, math.inf)}  # what a score can be (BLEU, chrF: 0-100)


def finite(v: float | None) -> bool:
    """A number to count: not missing, not NaN or infinite."""
    return v is not None and math.isfinite(v)
