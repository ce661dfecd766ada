"""Each score of a trial says what it is on, and the objective which validation it read (ablate.sweep.scored_on)."""

from __future__ import annotations

import json

import pytest
from sweep_summaries import VALID, on

from ablate.evaluation.records import describe_subset, write_eval_file
from ablate.sweep.scored_on import objective_on, scored_on
from ablate.sweep.trial import metric_value


def test_a_summary_says_what_each_score_is_on(tmp_path):
    assert scored_on(on(200)) == {
        "val/loss": "valid split, all 1,014 sentences",
        "val/ppl": "valid split, all 1,014 sentences",  # the one number the sweep's table and `ablate table` differ in
        "val/bleu": "valid split, 200 of 1,014 sentences (random, seed 0)",
    }
    assert scored_on(on(0))["val/bleu"] == "valid split, all 1,014 sentences"
    # train.val_bleu off: val/bleu is the evaluation record's, whose subset the record names (a W&B run: its summary).
    summary = on(2, val_bleu=False) | {"eval_record": "eval/valid.json"}
    fields = dict(indices=[3, 9], hypotheses=["a b", "c"], references=["a b", "c d"], nll=[1.0, 2.0], tokens=[3, 2])
    write_eval_file(tmp_path, "valid", dataset="multi30k", checkpoint="final", subset=describe_subset(2, VALID, 0), **fields)
    assert scored_on(summary, tmp_path)["val/bleu"] == "valid split, 2 of 1,014 sentences (random, seed 0)"
    record = json.loads((tmp_path / "eval" / "valid.json").read_text())
    assert scored_on(on(2, val_bleu=False) | {"eval/valid": record})["val/bleu"] == "valid split, 2 of 1,014 sentences (random, seed 0)"
    assert scored_on({"last": {"val/bleu": 20.0}}) == {"val/loss": None, "val/ppl": None, "val/bleu": None}  # an older run


@pytest.mark.parametrize(
    "summary, said",
    [
        ({"best": {"metric": "val/bleu", "value": 14.0}, "last": {"val/bleu": 13.2}}, "val/bleu at the best validation"),
        ({"best": {"metric": "val/bleu", "value": 14.0}, "last": {"val/bleu": 13.2}, "selected": "avg of last 2"}, "at the last"),
        ({"best": {"metric": "val/loss", "value": 2.0}, "last": {"val/bleu": 13.2}}, "val/bleu at the last validation"),
        ({"best": {"metric": "val/bleu", "value": None}, "last": {}, "val/bleu": 12.0}, "val/bleu of the whole run"),
    ],
)
def test_the_objective_says_which_validation_it_read_as_the_trial_read_it(summary, said):
    where = objective_on(summary, {"val/bleu": 1.0})
    assert said in where
    read = {"best": summary["best"]["value"], "last": summary["last"].get("val/bleu"), "whole": summary.get("val/bleu")}
    assert read[where.split(" ")[3]] == metric_value(summary, "val/bleu")  # the number it names is the objective's
    assert objective_on(summary, {"val/bleu": 1.0, "speed/tokens_per_s": 0.001}).endswith(" + 0.001 × speed/tokens_per_s of the whole run")
