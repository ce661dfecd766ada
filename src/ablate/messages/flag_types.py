"""Argparse types for ablate's numeric flags: a value out of range is a usage error naming the flag, as argparse words
it ("argument --beam: 0 must be an integer >= 1"), so no bad number reaches a command."""

from __future__ import annotations

import argparse
import math

MAX_BOOT = 1_000_000  # bootstrap resamples: past this the paired tests take hours and say nothing more


class Number:
    """An argparse type for a numeric flag: a finite `kind` from `low` to `high` (None: no bound); argparse names the
    flag in the error ("argument --beam: 0 must be an integer >= 1"), so no bad value reaches the command."""

    def __init__(self, kind: type, low: float, high: float | None = None):
        self.kind, self.low, self.high = kind, low, high
        self.__name__ = kind.__name__

    def __call__(self, text: str) -> int | float:
        what = "an integer" if self.kind is int else "a number"
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value) or value < self.low or (self.high is not None and value > self.high):
            bounds = f">= {self.low}" if self.high is None else f"from {self.low} to {self.high}"
            raise argparse.ArgumentTypeError(f"{text} must be {what} {bounds}")
        return value
