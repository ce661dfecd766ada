"""The worker's side of a trial: its objective read from the run summary."""

from __future__ import annotations

import pytest
from sweep_files import write

from ablate.sweep.load import load_sweep
from ablate.sweep.trial import objective_value


def test_objective_combines_terms_from_the_run_summary(tmp_path):
    path = write(
        tmp_path,
        "name: d\nbase: base.yaml\nvariants: {base: {}}\n"
        "objective: {terms: {val/bleu: 1.0, speed/tokens_per_s: 0.001}, direction: maximize}\n",
    )
    sweep = load_sweep(path)
    summary = {"best": {"metric": "val/bleu", "value": 30.0}, "last": {"val/bleu": 29.0, "val/ppl": 5.0}, "speed/tokens_per_s": 2000.0}
    assert objective_value(sweep.objective.terms, summary) == pytest.approx(32.0)
    sweep.objective.terms = {"val/nope": 1.0}
    with pytest.raises(KeyError, match="val/nope"):
        objective_value(sweep.objective.terms, summary)
