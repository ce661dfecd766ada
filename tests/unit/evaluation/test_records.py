"""The per-run evaluation record (ablate.evaluation.records): written and read back, refused when malformed (naming the
file), read from a W&B summary, aligned across runs; and the per-sentence NLL `ablate table --split test` computes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from sacrebleu.metrics import BLEU
from table_study import references, system, write_run

from ablate.cli import main
from ablate.config import ModelConfig
from ablate.data.batching import EncodedSplit, collate
from ablate.evaluation.records import EvalFileError, describe_subset, eval_record, read_eval_file, text_free, write_eval_file
from ablate.model import build_transformer
from ablate.model.loss import translation_loss
from ablate.table import corpus_scores, evaluation
from ablate.table.load import Run
from ablate.table.sentence_records import collect


def fields(n=30, seed=1):
    refs = references(n, seed=seed)
    return {**system(refs, 0.5, seed), "references": refs}


def test_written_file_reads_back_sorted_with_corpus_scores(tmp_path):
    f = fields()
    order = list(range(len(f["references"])))[::-1]  # given in any order, stored ascending
    shuffled = {k: [v[i] for i in order] for k, v in f.items()}
    path = write_eval_file(
        tmp_path,
        "valid",
        dataset="multi30k",
        checkpoint="avg.ckpt",
        indices=[2 * i for i in order],
        subset=describe_subset(30, 1014, 0),
        **shuffled,
    )
    assert path == tmp_path / "eval" / "valid.json" and not list(path.parent.glob(".*.tmp"))
    rec = read_eval_file(path, "valid")
    assert rec.indices == [2 * i for i in range(30)] and rec.references == f["references"] and rec.nll == f["nll"]
    assert rec.bleu == BLEU().corpus_score(f["hypotheses"], [f["references"]]).score
    assert rec.ppl == pytest.approx(math.exp(sum(f["nll"]) / sum(f["tokens"])))
    assert (rec.sentences, rec.subset, rec.checkpoint, rec.source) == (30, "random 30 of 1014 (seed 0)", "avg.ckpt", str(path))
    assert describe_subset(1014, 1014) == "all"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("nll"), "missing key 'nll'"),
        (lambda r: r.update(sentences=3), "sentences=3 but the lists have indices=30"),
        (lambda r: r["tokens"].__setitem__(4, 0), "tokens[4]=0 is not an integer >= 1"),
        (lambda r: r["nll"].__setitem__(2, float("nan")), "nll[2]=nan is not a finite number >= 0"),
        (lambda r: r["indices"].reverse(), "indices are not strictly ascending"),
        (lambda r: r.update(split="dev"), "split='dev' is not one of ['valid', 'test']"),
        (lambda r: r.update(bleu="high"), "'bleu' should be a number, got str"),
        (lambda r: r.pop("references"), "missing key 'references'"),
        (lambda r: (r.update(bleu_stats=text_free(r)["bleu_stats"]), r.pop("hypotheses")), "missing key 'hypotheses'"),
        (lambda r: r.update(text_free(r), bleu_stats=[[1, 2, 3]] * 30), "bleu_stats[0]=[1, 2, 3] is not a list of 10 integers >= 0"),
        (lambda r: r.update(text_free(r), bleu_stats=[[0] * 10]), "bleu_stats=1"),
        (  # more 2-grams matched than the hypothesis has: no real system scores so, and BLEU would exceed 100
            lambda r: r.update(text_free(r), bleu_stats=[[5, 5, 4, 9, 2, 1, 4, 3, 2, 1]] * 30),
            "bleu_stats[0]=[5, 5, 4, 9, 2, 1, 4, 3, 2, 1] is not a list of 10 integers >= 0 with no n-gram order matching",
        ),
    ],
)
def test_malformed_record_names_the_file_and_the_problem(tmp_path, edit, message):
    record = eval_record(split="valid", dataset="multi30k", checkpoint="best.ckpt", indices=range(30), **fields())
    edit(record)
    path = tmp_path / "valid.json"
    path.write_text(json.dumps(record))
    with pytest.raises(EvalFileError) as e:
        read_eval_file(path)
    assert str(path) in str(e.value) and message in str(e.value)


def test_unreadable_or_wrong_split_file_is_refused(tmp_path):
    path = tmp_path / "valid.json"
    path.write_text("{not json")
    with pytest.raises(EvalFileError, match="valid.json: not a readable evaluation file"):
        read_eval_file(path)
    path.write_text(json.dumps(eval_record(split="test", dataset="d", checkpoint="best.ckpt", indices=range(30), **fields())))
    with pytest.raises(EvalFileError, match="split='test' but the valid split was asked for"):
        read_eval_file(path, "valid")
    with pytest.raises(EvalFileError, match="lists differ in length"):
        eval_record(split="valid", dataset="d", checkpoint="best.ckpt", indices=range(29), **fields())


def test_text_free_record_scores_as_its_text_and_holds_none(tmp_path):
    record = eval_record(split="valid", dataset="multi30k", checkpoint="avg.ckpt", indices=range(30), **fields())
    stripped = text_free(record)
    assert "hypotheses" not in stripped and "references" not in stripped and len(stripped["bleu_stats"]) == 30
    path = tmp_path / "valid.json"
    path.write_text(json.dumps(stripped))
    rec = read_eval_file(path, "valid")
    assert rec.sentence_bleu_stats() == text_free(stripped)["bleu_stats"]  # already text-free: unchanged
    assert corpus_scores.corpus_bleu(np.array(rec.sentence_bleu_stats())) == pytest.approx(record["bleu"], abs=1e-12)


def test_text_and_text_free_records_of_one_study_align_and_agree(tmp_path):
    f = fields(30)
    a = write_run(tmp_path, "base", 1, records={"valid": f})
    b = write_run(tmp_path, "x", 1, records={"valid": f})
    text = json.loads((b / "eval" / "valid.json").read_text())
    (b / "eval" / "valid.json").write_text(json.dumps(text_free(text)))
    runs = [_run("base", str(a), run_dir=a), _run("x", str(b), run_dir=b)]
    ev = collect(runs, "valid")
    assert runs[0].bleu == pytest.approx(runs[1].bleu) and ev.sentences == 30
    other = f | {"references": ["x " + r for r in f["references"]]}  # longer references: not the same sentences
    c = write_run(tmp_path, "y", 1, records={"valid": other})
    (c / "eval" / "valid.json").write_text(json.dumps(text_free(json.loads((c / "eval" / "valid.json").read_text()))))
    with pytest.raises(EvalFileError, match="the reference of sentence 0 differs .* \\(its length\\)"):
        collect([*runs, _run("y", str(c), run_dir=c)], "valid")


def _run(row, source, **kw):
    return Run(row=row, config={}, ppl=None, bleu=None, params=None, tokens_per_s=None, step_ms=None, source=source, **kw)


def test_wandb_runs_carry_the_record_in_their_summary():
    record = eval_record(split="valid", dataset="multi30k", checkpoint="best.ckpt", indices=range(30), **fields())
    runs = [_run("base", "w1", summary={"eval/valid": record}), _run("x", "w2", summary={"eval": {"valid": record}})]
    ev = collect(runs, "valid")
    assert ev.runs_with_records == 2 and ev.sentences == 30 and runs[0].bleu == pytest.approx(record["bleu"])
    bad = dict(record, tokens=[])
    with pytest.raises(EvalFileError, match=r"w3 \(summary key eval/valid\): malformed"):
        collect([_run("base", "w3", summary={"eval/valid": bad})], "valid")


def test_runs_are_aligned_on_the_sentences_they_share(tmp_path):
    f = fields(40)
    a = write_run(tmp_path, "base", 1, records={"valid": f})
    b = write_run(tmp_path, "x", 1, records={"valid": {k: v[5:] for k, v in f.items()} | {"indices": range(5, 40)}})
    runs = [_run("base", str(a), run_dir=a), _run("x", str(b), run_dir=b)]
    ev = collect(runs, "valid")
    assert ev.sentences == 35 and ev.subset == "the 35 sentences common to all runs" and "35 they share" in ev.notes[0]
    assert runs[0].bleu == pytest.approx(BLEU().corpus_score(f["hypotheses"][5:], [f["references"][5:]]).score)
    assert runs[0].bleu == pytest.approx(runs[1].bleu)  # same hypotheses on the same sentences
    c = write_run(tmp_path, "y", 1, records={"valid": dict(f, references=f["references"][:7] + ["other"] + f["references"][8:])})
    with pytest.raises(EvalFileError, match=r"y-s1/eval/valid.json: the reference of sentence 7 differs from .*base-s1/eval/valid.json's"):
        collect(runs + [_run("y", str(c), run_dir=c)], "valid")


def test_split_test_evaluates_a_run_without_a_record_from_its_selected_checkpoint(tmp_path, monkeypatch):
    f = fields(25)
    write_run(tmp_path, "base", 1, records={"test": f})
    run = write_run(tmp_path, "C-N2", 1, {"model.enc_layers": 2, "model.dec_layers": 2})
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "best.ckpt").write_bytes(b"")
    (run / "checkpoints" / "avg.ckpt").write_bytes(b"")
    calls = []

    def fake_evaluate_run(run_dir: Path, split: str, device: str = "auto") -> Path:
        calls.append((run_dir, split, evaluation.selected_checkpoint(run_dir).name))
        return write_eval_file(run_dir, split, dataset="multi30k", checkpoint="avg.ckpt", indices=range(25), **f)

    monkeypatch.setattr(evaluation, "evaluate_run", fake_evaluate_run)
    monkeypatch.chdir(tmp_path)
    assert main(["table", str(tmp_path), "--split", "test", "--boot", "100"]) == 0
    assert calls == [(run, "test", "avg.ckpt")] and (run / "eval" / "test.json").exists()
    report = json.loads((tmp_path / "tables" / tmp_path.name / "table3.json").read_text())  # the default --out
    assert report["checkpoints"] == ["avg.ckpt", "best.ckpt"] and report["rows"][1]["bleu"]["delta"] == 0.0


def test_the_checkpoint_scored_on_test_holds_the_weights_the_run_reported(tmp_path):
    """avg.ckpt for a run that reported its last-K average; last.ckpt for one that reported its final weights, and only
    when it was saved at the run's last step (a rule may stop between saves); best.ckpt never stands in for either."""

    def run(name: str, selected: str, steps: int, files: dict[str, int]) -> Path:
        d = write_run(tmp_path, name, 1, summary={"last": {"val/bleu": 20.0}, "selected": selected, "steps": steps})
        (d / "checkpoints").mkdir()
        for f, step in files.items():
            torch.save({"global_step": step, "state_dict": {}}, d / "checkpoints" / f)
        return d

    avg = run("avg", "avg of last 5", 900, {"avg.ckpt": 900, "best.ckpt": 500, "last.ckpt": 900})
    assert evaluation.selected_checkpoint(avg).name == "avg.ckpt"
    no_avg = run("noavg", "avg of last 5", 900, {"best.ckpt": 500, "last.ckpt": 900})
    assert evaluation.selected_checkpoint(no_avg) is None and "avg.ckpt" in evaluation.wanted_checkpoint(no_avg)
    final = run("final", "final weights", 900, {"best.ckpt": 500, "last.ckpt": 900})
    assert evaluation.selected_checkpoint(final).name == "last.ckpt"
    stale = run("stale", "final weights", 930, {"best.ckpt": 500, "last.ckpt": 900})  # stopped 30 steps after the save
    assert evaluation.selected_checkpoint(stale) is None and "last step" in evaluation.wanted_checkpoint(stale)
    with pytest.raises(ValueError, match=r"run 'stale' .* no checkpoints/last.ckpt saved at the run's last step"):
        evaluation.evaluator("test")(_run("stale", str(stale), run_dir=stale))
    older = run("older", "", 900, {"best.ckpt": 500})  # recorded no selection: the best, as before
    assert evaluation.selected_checkpoint(older).name == "best.ckpt"


def test_sentence_nll_sums_to_the_training_loss_nll():
    torch.manual_seed(0)
    model = build_transformer(ModelConfig(enc_layers=1, dec_layers=1, d_model=16, heads=2, d_ff=32, dropout=0.0), 40).eval()
    rng = np.random.default_rng(0)
    pairs = [(rng.integers(4, 40, size=int(rng.integers(2, 9))), rng.integers(4, 40, size=int(rng.integers(1, 7)))) for _ in range(5)]
    src = [np.append(s, 3) for s, _ in pairs]  # EOS ends every source
    encoded = EncodedSplit(
        np.concatenate(src).astype(np.int32),
        np.cumsum([0] + [len(s) for s in src]),
        np.concatenate([t for _, t in pairs]).astype(np.int32),
        np.cumsum([0] + [len(t) for _, t in pairs]),
        np.arange(5),
    )
    batch = collate([encoded[i] for i in range(5)])
    per_sentence, tokens = evaluation.sentence_nll(model, batch)
    with torch.no_grad():
        _, nll, ntok = translation_loss(model, batch, smoothing=0.0)
    assert per_sentence.sum().item() == pytest.approx(nll.item(), rel=1e-5) and tokens.sum() == ntok
    assert tokens.tolist() == [len(t) + 1 for _, t in pairs]  # EOS included
    nlls, toks = evaluation.split_nll(model, encoded, torch.device("cpu"))  # batched by length, back in order
    assert nlls == pytest.approx(per_sentence.tolist(), rel=1e-5) and toks == tokens.tolist()
