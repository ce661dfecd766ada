"""The words `ablate table`'s notes share: p-values, counted nouns (a metric's name: ablate.table.score_kinds)."""

from __future__ import annotations


def p_words(p: float) -> str:
    """ "p 0.034", "p < 0.001" """
    return "p < 0.001" if p < 0.001 else f"p {p:.3f}"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
