"""Decoding and scoring for `ablate translate` / `ablate evaluate`: length batches, the long-source filter, the
score record, and translate() with a tiny random model against beam_search called directly."""

from __future__ import annotations

import pytest
import torch
from helpers import write_corpus

from ablate.config import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
from ablate.data.tokenizer import Tokenizer, load_or_train_tokenizer
from ablate.evaluation.scores import bleu, chrf, score
from ablate.evaluation.search import beam_search
from ablate.inference.translation import length_batches, longer_than, pick_device, translate
from ablate.model import build_transformer
from ablate.model.tokens import EOS_ID, PAD_ID

LINES = ["the big dog runs", "a cat", "the old woman eats a small green bird", "", "red", "blue bird sleeps"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Tokenizer:
    folder = tmp_path_factory.mktemp("tok")
    corpus = write_corpus(folder / "corpus", n_valid=1, n_test=1)
    data = DataConfig(dataset="files", vocab_size=64, cache_dir=str(folder / "cache"))
    return load_or_train_tokenizer(data, corpus / "train.en", corpus / "train.de")


def setup(tokenizer: Tokenizer, **model) -> tuple:
    torch.manual_seed(0)
    cfg = ExperimentConfig(
        model=ModelConfig(**{**dict(enc_layers=1, dec_layers=1, d_model=16, d_ff=32, heads=2, dropout=0.0), **model}),
        train=TrainConfig(beam_size=2, length_penalty=0.6, max_len_a=1.0, max_len_b=4),
    )
    return build_transformer(cfg.model, tokenizer.vocab_size).eval(), cfg


def direct(model, tokenizer, ids: list[int], cfg, beam: int, alpha: float, cap=None) -> str:
    t = cfg.train
    [out] = beam_search(model, torch.tensor([ids]), beam, alpha, t.max_len_a, t.max_len_b, cap)
    return tokenizer.decode([out])[0]


# --- length_batches -----------------------------------------------------------------------------------------------

ENCODED = [[5] * n for n in (3, 9, 1, 4, 4, 2, 7, 12)]


@pytest.mark.parametrize("batch_tokens", [1, 8, 16, 30, 1000])
def test_length_batches_cover_every_row_once_sorted_by_length_within_the_token_budget(batch_tokens):
    batches = list(length_batches(ENCODED, batch_tokens))
    rows = [i for r, _ in batches for i in r]
    assert sorted(rows) == list(range(len(ENCODED)))
    assert [len(ENCODED[i]) for i in rows] == sorted(len(x) for x in ENCODED)
    for r, src in batches:
        longest = max(len(ENCODED[i]) for i in r)
        assert src.shape == (len(r), longest) and src.dtype == torch.long
        assert src.numel() <= batch_tokens or len(r) == 1  # a row longer than the budget goes alone
        for b, i in enumerate(r):
            assert src[b, : len(ENCODED[i])].tolist() == ENCODED[i]
            assert (src[b, len(ENCODED[i]) :] == PAD_ID).all()


def test_length_batches_fill_each_batch_as_far_as_the_budget_allows():
    sizes = [len(r) for r, _ in length_batches([[7] * 4] * 10, 12)]
    assert sizes == [3, 3, 3, 1]
    assert [len(r) for r, _ in length_batches([[7] * 4] * 10, 3)] == [1] * 10
    assert list(length_batches([], 100)) == []


# --- longer_than and score ----------------------------------------------------------------------------------------


def test_longer_than_keeps_aligned_pairs_whose_source_has_more_than_n_tokens(tokenizer):
    refs = [f"ref {i}" for i in range(len(LINES))]
    lengths = [len(ids) for ids in tokenizer.encode(LINES)]
    n = sorted(lengths)[len(lengths) // 2]
    srcs, kept = longer_than(tokenizer, LINES, refs, n)
    assert srcs == [s for s, k in zip(LINES, lengths) if k > n] and 0 < len(srcs) < len(LINES)
    assert kept == [refs[LINES.index(s)] for s in srcs]
    assert longer_than(tokenizer, LINES, refs, max(lengths)) == ([], [])
    assert longer_than(tokenizer, LINES, refs, -1) == (LINES, refs)


def test_score_reports_bleu_and_chrf_rounded_with_signatures_and_the_sentence_count():
    hyps, refs = ["the cat sat on the mat", "a dog barks"], ["the cat sat on a mat", "a dog barks loudly"]
    result = score(hyps, refs)
    b, c = bleu(hyps, refs), chrf(hyps, refs)
    assert result == {
        "bleu": round(b.score, 2),
        "bleu_signature": b.signature,
        "chrf": round(c.score, 2),
        "chrf_signature": c.signature,
        "sentences": 2,
    }
    assert result["bleu"] != result["chrf"] and 0 < result["bleu"] < 100
    assert score(refs, refs)["bleu"] == 100.0


def test_pick_device_refuses_a_device_this_machine_lacks_naming_the_ones_it_has(monkeypatch):
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in ("cuda", "cuda:1", "foo", "mps", "meta"):
        with pytest.raises(ValueError, match=f"--device {name}: no such device here \\(this machine has: auto, cpu\\)"):
            pick_device(name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert pick_device("cuda:1") == torch.device("cuda:1")
    with pytest.raises(ValueError, match="cuda:2: no such device here \\(this machine has: auto, cpu, cuda, cuda:0, cuda:1\\)"):
        pick_device("cuda:2")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)  # an Apple GPU
    assert pick_device("mps") == torch.device("mps")


# --- translate ----------------------------------------------------------------------------------------------------


def test_translate_matches_beam_search_on_each_line_alone_in_input_order(tokenizer):
    model, cfg = setup(tokenizer)
    out = translate(model, tokenizer, LINES, cfg, beam=3, alpha=0.0)
    assert len(out) == len(LINES)
    expected = [direct(model, tokenizer, ids + [EOS_ID], cfg, 3, 0.0) for ids in tokenizer.encode(LINES)]
    assert out == expected
    assert len(set(out)) > 1  # a degenerate model would make the comparison above vacuous


def test_translate_does_not_depend_on_how_lines_are_batched(tokenizer):
    model, cfg = setup(tokenizer)
    together = translate(model, tokenizer, LINES, cfg, batch_tokens=4000)
    alone = translate(model, tokenizer, LINES, cfg, batch_tokens=1)
    assert together == alone


def test_translate_of_no_lines_is_an_empty_list(tokenizer):
    model, cfg = setup(tokenizer)
    assert translate(model, tokenizer, [], cfg) == []


def test_translate_defaults_to_the_configs_beam_and_length_penalty(tokenizer):
    model, cfg = setup(tokenizer)
    ids = tokenizer.encode(LINES[2:3])[0] + [EOS_ID]
    assert translate(model, tokenizer, LINES[2:3], cfg) == [direct(model, tokenizer, ids, cfg, 2, 0.6)]
    alpha0 = translate(model, tokenizer, LINES[2:3], cfg, alpha=0.0)  # 0.0 is a choice, not "use the default"
    assert alpha0 == [direct(model, tokenizer, ids, cfg, 2, 0.0)]


def test_translate_cuts_sources_to_what_a_bounded_positional_encoding_takes(tokenizer):
    model, cfg = setup(tokenizer, positional="learned", max_positions=8)
    line = "the old woman eats a small green bird and the big dog runs"
    ids = tokenizer.encode([line])[0]
    assert len(ids) > 8
    [out] = translate(model, tokenizer, [line], cfg)
    assert out == direct(model, tokenizer, ids[:7] + [EOS_ID], cfg, 2, 0.6, cap=8)
