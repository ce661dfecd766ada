"""The per-run evaluation record (ablate.evaluation.records): written and read back, refused when malformed (naming the
file), read from a W&B summary, aligned across runs; and the per-sentence NLL `ablate table --split test` computes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from sacrebleu.metrics import BLEU
from table_study import bare_run, record_fields, write_run

from ablate.config import ModelConfig
from ablate.data.batching import EncodedSplit, collate
from ablate.evaluation.records import EvalFileError, describe_subset, eval_record, read_eval_file, text_free, write_eval_file
from ablate.evaluation.sentence_scores import sentence_nll, split_nll
from ablate.model import build_transformer
from ablate.model.loss import translation_loss
from ablate.table import corpus_scores
from ablate.table.sentence_records import collect


def test_written_file_reads_back_sorted_with_corpus_scores(tmp_path):
    f = record_fields()
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
    record = eval_record(split="valid", dataset="multi30k", checkpoint="best.ckpt", indices=range(30), **record_fields())
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
    path.write_text(json.dumps(eval_record(split="test", dataset="d", checkpoint="best.ckpt", indices=range(30), **record_fields())))
    with pytest.raises(EvalFileError, match="split='test' but the valid split was asked for"):
        read_eval_file(path, "valid")
    with pytest.raises(EvalFileError, match="lists differ in length"):
        eval_record(split="valid", dataset="d", checkpoint="best.ckpt", indices=range(29), **record_fields())


def test_text_free_record_scores_as_its_text_and_holds_none(tmp_path):
    record = eval_record(split="valid", dataset="multi30k", checkpoint="avg.ckpt", indices=range(30), **record_fields())
    stripped = text_free(record)
    assert "hypotheses" not in stripped and "references" not in stripped and len(stripped["bleu_stats"]) == 30
    path = tmp_path / "valid.json"
    path.write_text(json.dumps(stripped))
    rec = read_eval_file(path, "valid")
    assert rec.sentence_bleu_stats() == text_free(stripped)["bleu_stats"]  # already text-free: unchanged
    assert corpus_scores.corpus_bleu(np.array(rec.sentence_bleu_stats())) == pytest.approx(record["bleu"], abs=1e-12)


def test_text_and_text_free_records_of_one_study_align_and_agree(tmp_path):
    f = record_fields(30)
    a = write_run(tmp_path, "base", 1, records={"valid": f})
    b = write_run(tmp_path, "x", 1, records={"valid": f})
    text = json.loads((b / "eval" / "valid.json").read_text())
    (b / "eval" / "valid.json").write_text(json.dumps(text_free(text)))
    runs = [bare_run("base", str(a), run_dir=a), bare_run("x", str(b), run_dir=b)]
    ev = collect(runs, "valid")
    assert runs[0].bleu == pytest.approx(runs[1].bleu) and ev.sentences == 30
    other = f | {"references": ["x " + r for r in f["references"]]}  # longer references: not the same sentences
    c = write_run(tmp_path, "y", 1, records={"valid": other})
    (c / "eval" / "valid.json").write_text(json.dumps(text_free(json.loads((c / "eval" / "valid.json").read_text()))))
    with pytest.raises(EvalFileError, match="the reference of sentence 0 differs .* \\(its length\\)"):
        collect([*runs, bare_run("y", str(c), run_dir=c)], "valid")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sentence_nll_sums_to_the_training_loss_nll(dtype):
    """In a float64 run's own precision too: the record's NLLs were rounded to float32 (and a float64 run whose logits
    passed float32's range got NaN records and failed at its end, though its validation loss was finite)."""
    torch.manual_seed(0)
    model = build_transformer(ModelConfig(enc_layers=1, dec_layers=1, d_model=16, heads=2, d_ff=32, dropout=0.0), 40).eval()
    model = model.to(dtype)
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
    per_sentence, tokens = sentence_nll(model, batch)
    with torch.no_grad():
        _, nll, ntok = translation_loss(model, batch, smoothing=0.0)
    rel = 1e-5 if dtype == torch.float32 else 1e-12
    assert per_sentence.dtype == dtype and per_sentence.sum().item() == pytest.approx(nll.item(), rel=rel) and tokens.sum() == ntok
    assert tokens.tolist() == [len(t) + 1 for _, t in pairs]  # EOS included
    nlls, toks = split_nll(model, encoded, torch.device("cpu"))  # batched by length, back in order
    assert nlls == pytest.approx(per_sentence.tolist(), rel=rel) and toks == tokens.tolist()
    if dtype == torch.float64:  # logits past float32's range: finite in the run's own precision
        with torch.no_grad():
            huge, _ = sentence_nll(lambda src, tgt: model(src, tgt) * 1e40, batch)
        assert torch.isfinite(huge).all()


def test_a_record_is_scored_again_with_the_tokenizer_its_signature_names():
    """A Chinese target's record (tok:zh) re-scored from its text by the table with 13a gave another BLEU than the run
    reported, under a 13a signature."""
    hyps, refs = ["我喜欢猫和狗", "今天天气很好", "他在看书"], ["我喜欢狗和猫", "今天天气很好", "她在看书"]
    fields = {"hypotheses": hyps, "references": refs, "nll": [1.0, 2.0, 3.0], "tokens": [4, 5, 6]}
    record = eval_record(split="valid", dataset="files", checkpoint="last.ckpt", indices=range(3), tokenize="zh", **fields)
    assert "|tok:zh|" in record["bleu_signature"]
    stats = text_free(record)["bleu_stats"]
    assert corpus_scores.corpus_bleu(np.array(stats)) == pytest.approx(record["bleu"], abs=1e-12)
    assert corpus_scores.bleu_signature("zh") == record["bleu_signature"]
    plain = eval_record(split="valid", dataset="files", checkpoint="last.ckpt", indices=range(3), **fields)
    assert plain["bleu"] != record["bleu"] and text_free(plain)["bleu_stats"] != stats


def test_a_tokenizer_signed_with_its_version_is_named_by_its_name():
    """sacreBLEU signs MeCab's tokenizers with their versions (tok:ja-mecab-0.996-IPA): taken as a name, every table of
    a Japanese or Korean study stopped on a KeyError traceback."""
    from ablate.evaluation.records import signature_tokenizer

    signed = {"ja-mecab-0.996-IPA": "ja-mecab", "ko-mecab-0.996/ko-0.9.2-KO": "ko-mecab", "zh": "zh", "13a": "13a"}
    for tok, name in signed.items():
        assert signature_tokenizer(f"nrefs:1|case:mixed|eff:no|tok:{tok}|smooth:exp|version:2.6.0") == name
    assert signature_tokenizer("") == "13a"  # a record made before ablate chose by language
