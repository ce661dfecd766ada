"""The cached joint BPE tokenizer: reuse, retraining, special ids, bad settings."""

from __future__ import annotations

import pickle

import pytest
from text_corpora import data_cfg, write_corpus

import ablate.data.tokenizer as tokenizer_module
from ablate.data.module import load_or_train_tokenizer
from ablate.model.tokens import BOS_ID as BOS
from ablate.model.tokens import EOS_ID as EOS
from ablate.model.tokens import PAD_ID as PAD
from ablate.model.tokens import UNK_ID as UNK


@pytest.fixture
def train_files(tmp_path):
    return write_corpus(tmp_path, "train", 300)


@pytest.fixture
def train_calls(monkeypatch):
    calls = []
    real = tokenizer_module.train_tokenizer

    def counting(*args, **kw):
        calls.append(kw)
        return real(*args, **kw)

    monkeypatch.setattr(tokenizer_module, "train_tokenizer", counting)
    return calls


def test_tokenizer_cache_reuse_and_retrain(tmp_path, train_files, train_calls):
    cfg = data_cfg(tmp_path)
    first = load_or_train_tokenizer(cfg, *train_files)
    mtime = first.path.stat().st_mtime_ns
    again = load_or_train_tokenizer(cfg, *train_files)
    assert again.path == first.path and again.path.stat().st_mtime_ns == mtime and len(train_calls) == 1
    assert first.vocab_size == 64

    other_vocab = load_or_train_tokenizer(data_cfg(tmp_path, vocab_size=60), *train_files)
    assert other_vocab.path.parent != first.path.parent and other_vocab.vocab_size == 60 and len(train_calls) == 2

    src, _ = train_files
    src.write_bytes(src.read_bytes().replace(b"dog", b"dgo", 1))  # one corpus byte pair changes
    changed = load_or_train_tokenizer(cfg, *train_files)
    assert changed.path.parent not in (first.path.parent, other_vocab.path.parent) and len(train_calls) == 3
    assert not [p for p in (tmp_path / "cache" / "tokenizers").iterdir() if p.name.startswith(".")], "temp dirs left"


@pytest.mark.parametrize("damage", ["truncated", "replaced", "settings-lost"])
def test_a_damaged_cache_entry_is_trained_again_with_a_warning_naming_it(tmp_path, train_files, train_calls, caplog, damage):
    cfg = data_cfg(tmp_path)
    original = load_or_train_tokenizer(cfg, *train_files)
    good, data = original.path, original.path.read_bytes()
    sentences = train_files[0].read_text().splitlines()[:50]
    if damage == "truncated":
        good.write_bytes(data[: len(data) // 2])
    elif damage == "replaced":  # other bytes that SentencePiece loads: only the sha256 settings.json records tells
        good.write_bytes(load_or_train_tokenizer(data_cfg(tmp_path, vocab_size=60), *train_files).path.read_bytes())
    else:  # no digest to compare with, a model that loads: kept (an entry from before digests were recorded)
        (good.parent / "settings.json").unlink()
    calls, damaged = len(train_calls), good.read_bytes()
    again = load_or_train_tokenizer(cfg, *train_files)
    assert again.path == good and again.vocab_size == 64
    if damage == "settings-lost":
        assert len(train_calls) == calls and "damaged" not in caplog.text
        return
    assert len(train_calls) == calls + 1 and f"damaged tokenizer cache entry {good}" in caplog.text
    # Trained again: the same bytes as first, not the damaged ones
    assert good.read_bytes() == data != damaged and again.encode(sentences) == original.encode(sentences)


def test_tokenizer_special_ids_round_trip_and_determinism(tmp_path, train_files):
    tok = load_or_train_tokenizer(data_cfg(tmp_path), *train_files)
    assert [tok._sp.id_to_piece(i) for i in (PAD, UNK, BOS, EOS)] == ["<pad>", "<unk>", "<s>", "</s>"]
    texts = ["the dog runs in the park", "ein kind sitzt"]
    ids = tok.encode(texts)
    assert all(PAD not in seq and EOS not in seq for seq in ids)
    assert tok.decode(ids) == texts
    padded = [[BOS] + ids[0] + [EOS, 17, PAD], ids[1] + [PAD, PAD]]
    assert tok.decode(padded) == texts, "decode stops at eos and skips bos/pad"
    assert pickle.loads(pickle.dumps(tok)).encode(texts) == ids


def test_the_same_tokenizer_trained_twice_has_the_same_bytes(tmp_path, train_files, monkeypatch):
    """SentencePiece stored the temp folder it trained in (a random name, the PID) and the thread count in the model,
    so each training of one tokenizer had other bytes, and fingerprint.json's sha256 of it could not check a
    reproduction. Into two caches, with another thread count: the same bytes, which load as the same model."""
    from sentencepiece import sentencepiece_model_pb2

    tok = load_or_train_tokenizer(data_cfg(tmp_path / "one"), *train_files)
    monkeypatch.setattr(tokenizer_module, "TRAIN_THREADS", 1 if tokenizer_module.TRAIN_THREADS > 1 else 2)
    twin = load_or_train_tokenizer(data_cfg(tmp_path / "two"), *train_files)
    assert twin.path != tok.path and twin.path.read_bytes() == tok.path.read_bytes()
    spec = sentencepiece_model_pb2.ModelProto.FromString(tok.path.read_bytes()).trainer_spec
    assert (spec.model_prefix, list(spec.input), spec.vocab_size, spec.pad_id) == ("", [], 64, PAD)
    assert twin.encode(["the dog runs"]) == tok.encode(["the dog runs"])


def test_tokenizer_vocab_too_large_or_bad_sample(tmp_path, train_files):
    with pytest.raises(ValueError, match=r"data.vocab_size=5000 is too large.*smaller data.vocab_size"):
        load_or_train_tokenizer(data_cfg(tmp_path, vocab_size=5000), *train_files)
    with pytest.raises(ValueError, match=r"data.tokenizer_sample=50"):
        load_or_train_tokenizer(data_cfg(tmp_path, tokenizer_sample=50), *train_files)
    assert not list((tmp_path / "cache" / "tokenizers").iterdir()), "a failed training leaves nothing behind"


def test_an_entry_cut_short_and_a_killed_builders_folder_are_cleared(tmp_path, train_files):
    """The data review: an entry without spm.model (cut short while removed) made every later run fail to rename onto
    it ("Directory not empty"); a killed builder's folder stayed for good where another process finished first."""
    from ablate.files.atomic import HOST_TAG

    cfg = data_cfg(tmp_path)
    entry = load_or_train_tokenizer(cfg, *train_files).path.parent
    (entry / "spm.model").unlink()
    assert load_or_train_tokenizer(cfg, *train_files).path == entry / "spm.model"
    dead = entry.parent / f".{entry.name}.{HOST_TAG}-999999999.abcd.tmp"  # no such process
    dead.mkdir()
    load_or_train_tokenizer(cfg, *train_files)
    assert not dead.exists()


def test_a_corpus_of_sentences_over_sentencepieces_limit_is_said_as_such(tmp_path):
    with pytest.raises(ValueError, match=r"SentencePiece found no training sentence under its 4192-byte limit among 4: are the files"):
        tokenizer_module.train_tokenizer(["a b c d " * 1200] * 4, tmp_path, vocab_size=64, character_coverage=1.0)
