"""The runs' evaluation records read and aligned for `ablate table` (ablate.table.sentence_records): from a run
directory or a W&B summary, on the sentences every record scored, references checked to agree."""

from __future__ import annotations

import pytest
from sacrebleu.metrics import BLEU
from table_study import bare_run, record_fields, write_run

from ablate.evaluation.records import EvalFileError, eval_record
from ablate.table.sentence_records import collect


def test_wandb_runs_carry_the_record_in_their_summary():
    record = eval_record(split="valid", dataset="multi30k", checkpoint="best.ckpt", indices=range(30), **record_fields())
    runs = [bare_run("base", "w1", summary={"eval/valid": record}), bare_run("x", "w2", summary={"eval": {"valid": record}})]
    ev = collect(runs, "valid")
    assert ev.runs_with_records == 2 and ev.sentences == 30 and runs[0].bleu == pytest.approx(record["bleu"])
    bad = dict(record, tokens=[])
    with pytest.raises(EvalFileError, match=r"w3 \(summary key eval/valid\): malformed"):
        collect([bare_run("base", "w3", summary={"eval/valid": bad})], "valid")


def test_runs_are_aligned_on_the_sentences_they_share(tmp_path):
    f = record_fields(40)
    a = write_run(tmp_path, "base", 1, records={"valid": f})
    b = write_run(tmp_path, "x", 1, records={"valid": {k: v[5:] for k, v in f.items()} | {"indices": range(5, 40)}})
    runs = [bare_run("base", str(a), run_dir=a), bare_run("x", str(b), run_dir=b)]
    ev = collect(runs, "valid")
    assert ev.sentences == 35 and ev.subset == "the 35 sentences common to all runs" and "35 they share" in ev.notes[0]
    assert runs[0].bleu == pytest.approx(BLEU().corpus_score(f["hypotheses"][5:], [f["references"][5:]]).score)
    assert runs[0].bleu == pytest.approx(runs[1].bleu)  # same hypotheses on the same sentences
    c = write_run(tmp_path, "y", 1, records={"valid": dict(f, references=f["references"][:7] + ["other"] + f["references"][8:])})
    with pytest.raises(EvalFileError, match=r"y-s1/eval/valid.json: the reference of sentence 7 differs from .*base-s1/eval/valid.json's"):
        collect(runs + [bare_run("y", str(c), run_dir=c)], "valid")
