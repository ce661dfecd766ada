"""Crafted run summaries for the sweep's results tests: what a run records its validation scores are on."""

from __future__ import annotations

from types import SimpleNamespace

from ablate.experiment import load_config
from ablate.run.evaluation import scored_on as recorded_on

SWEEP = "name: demo\nbase: base.yaml\nobjective: {metric: val/bleu, direction: maximize}\nvariants: {base: {}, A-h1: {model.heads: 1}}\n"
VALID = 1014  # sentences in the crafted validation split


def on(val_max_sentences: int, val_bleu: bool = True) -> dict:
    """summary.json's record of what its validation scores are on, as a run writes it (ablate.run.evaluation)."""
    cfg = load_config(train={"val_max_sentences": val_max_sentences, "val_bleu": val_bleu})
    return recorded_on(cfg, SimpleNamespace(raw=lambda split: ([], ["ref"] * VALID)))
