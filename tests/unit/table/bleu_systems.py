"""Crafted translation systems for the table's statistics tests: random sentences, and a system that copies the
reference in a given share of them (the fixtures over them are in conftest.py)."""

from __future__ import annotations

VOCAB = [f"w{i}" for i in range(400)]


def sentence(rng):
    return " ".join(rng.choice(VOCAB, size=int(rng.integers(5, 20)))) + str(rng.choice([".", ",", "!", "?", ""]))


def system(refs, copy_rate, seed):
    """One seed's output: the reference in about `copy_rate` of the sentences, random words elsewhere."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [ref if rng.random() < copy_rate else sentence(rng) for ref in refs]
