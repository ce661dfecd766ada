"""Corpus reading, the cached BPE tokenizer, token-bucketed batches and the DataModule, on tiny corpora."""

from __future__ import annotations

import gzip
import logging
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from ablate.config import DataConfig, ExperimentConfig
from ablate.data import (
    BOS, EOS, PAD, UNK, TokenBucketBatchSampler, TranslationDataModule, collate, encode_pairs, load_or_train_tokenizer,
    read_parallel,
)  # fmt: skip
import ablate.tokenizer as tokenizer_module

# word-for-word "translations", so a round trip through the pipeline is easy to check
EN = "a the dog cat man woman child runs jumps sits on in under red blue big small old young house".split()
DE = "ein der hund katze mann frau kind rennt springt sitzt auf in unter rot blau gross klein alt jung haus".split()


def write(path: Path, lines: list[str], gz: bool = False, newline: str = "\n") -> Path:
    data = "".join(line + newline for line in lines).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        words = rng.choices(range(len(EN)), k=rng.randint(1, 12))
        src.append(" ".join(EN[w] for w in words))
        tgt.append(" ".join(DE[w] for w in words))
    return src, tgt


def write_corpus(folder: Path, name: str, n: int, seed: int = 0) -> tuple[Path, Path]:
    src, tgt = corpus(n, seed)
    return write(folder / f"{name}.en", src), write(folder / f"{name}.de", tgt)


def data_cfg(tmp_path: Path, **kw) -> DataConfig:
    defaults = dict(dataset="files", vocab_size=64, max_len=16, max_tokens=64, cache_dir=str(tmp_path / "cache"))
    return DataConfig(**{**defaults, **kw})


# -- corpus ----------------------------------------------------------------------------------


def test_gz_and_plain_read_alike(tmp_path):
    src, tgt = corpus(20)
    plain = read_parallel(write(tmp_path / "p.en", src), write(tmp_path / "p.de", tgt))[0]
    # gzip is detected by magic bytes, not by suffix
    zipped = read_parallel(write(tmp_path / "z.en.gz", src, gz=True), write(tmp_path / "z_de", tgt, gz=True))[0]
    assert plain == zipped == list(zip(src, tgt))


def test_line_count_mismatch_names_both_files(tmp_path):
    a, b = write(tmp_path / "a.en", ["x", "y", "z"]), write(tmp_path / "b.de", ["x", "y"])
    with pytest.raises(ValueError, match=rf"{a}.* 3 lines.*{b}.* 2 lines"):
        read_parallel(a, b)


def test_missing_file_is_named(tmp_path):
    a = write(tmp_path / "a.en", ["x"])
    with pytest.raises(FileNotFoundError, match="nope.de"):
        read_parallel(a, tmp_path / "nope.de")


def test_invalid_utf8_names_file_and_line(tmp_path):
    a = write(tmp_path / "a.en", ["ok", "ok", "ok"])
    b = tmp_path / "b.de.gz"
    b.write_bytes(gzip.compress(b"gut\ngut\nschlecht \xff\xfe\n"))
    with pytest.raises(ValueError, match=rf"{b}:3: not valid UTF-8"):
        read_parallel(a, b)


def test_empty_lines_dropped_and_counted(tmp_path, caplog):
    a = write(tmp_path / "a.en", ["one", "", "three", "   ", "five"])
    b = write(tmp_path / "b.de", ["eins", "zwei", "", "vier", "fuenf"])
    with caplog.at_level(logging.INFO, logger="ablate.corpus"):
        pairs, stats = read_parallel(a, b)
    assert pairs == [("one", "eins"), ("five", "fuenf")]
    assert (stats.lines, stats.kept, stats.empty) == (5, 2, 3)
    assert "dropped 3 empty pairs" in caplog.text


def test_crlf_and_unicode_line_separators(tmp_path):
    # U+2028 inside a sentence must not split it (str.splitlines would)
    a = write(tmp_path / "a.en", ["one\u2028half", "two"], newline="\r\n")
    b = write(tmp_path / "b.de", ["eins", "zwei"], newline="\r\n")
    assert read_parallel(a, b)[0] == [("one\u2028half", "eins"), ("two", "zwei")]


# -- tokenizer -------------------------------------------------------------------------------


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
    twin = load_or_train_tokenizer(data_cfg(tmp_path / "other"), *train_files)
    pieces = lambda t: [(t._sp.id_to_piece(i), t._sp.get_score(i)) for i in range(t.vocab_size)]  # noqa: E731
    assert pieces(twin) == pieces(tok), "training is deterministic"  # (the file embeds its temp dir's name)


def test_tokenizer_vocab_too_large_or_bad_sample(tmp_path, train_files):
    with pytest.raises(ValueError, match=r"data.vocab_size=5000 is too large.*smaller data.vocab_size"):
        load_or_train_tokenizer(data_cfg(tmp_path, vocab_size=5000), *train_files)
    with pytest.raises(ValueError, match=r"data.tokenizer_sample=50"):
        load_or_train_tokenizer(data_cfg(tmp_path, tokenizer_sample=50), *train_files)
    assert not list((tmp_path / "cache" / "tokenizers").iterdir()), "a failed training leaves nothing behind"


def test_encode_pairs_drop_or_truncate_and_collate(tmp_path, train_files, caplog):
    tok = load_or_train_tokenizer(data_cfg(tmp_path), *train_files)
    pairs = [("the dog", "der hund"), (" ".join(["the big red dog"] * 10), "der hund"), ("a cat", "eine katze")]
    with caplog.at_level(logging.INFO, logger="ablate.batching"):
        kept = encode_pairs(tok, pairs, max_len=12)
    assert kept.idx.tolist() == [0, 2] and "dropped 1 of 3 pairs" in caplog.text
    cut = encode_pairs(tok, pairs, max_len=12, overlong="truncate")
    assert cut.idx.tolist() == [0, 1, 2] and cut.src_lens.max() == 12

    batch = collate([cut[0], cut[1]])
    s, t = tok.encode(["the dog"])[0], tok.encode(["der hund"])[0]
    assert batch["src"].shape == (2, 12) and batch["src"].dtype == torch.long
    assert batch["src"][0].tolist() == s + [EOS] + [PAD] * (12 - len(s) - 1)
    assert batch["tgt_in"][0, : len(t) + 1].tolist() == [BOS] + t
    assert batch["tgt_out"][0, : len(t) + 1].tolist() == t + [EOS]
    assert batch["tgt_in"].shape == batch["tgt_out"].shape and batch["idx"].tolist() == [0, 1]
    assert batch["src_tokens"] == int((batch["src"] != PAD).sum()) == len(s) + 1 + 12
    assert batch["tgt_tokens"] == 2 * (len(t) + 1)


# -- bucketing -------------------------------------------------------------------------------


def lengths(n: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(2, 60, n)
    return src, np.clip(src + rng.integers(-5, 6, n), 2, 60)


def sampler(**kw) -> TokenBucketBatchSampler:
    src, tgt = lengths()
    return TokenBucketBatchSampler(src, tgt, **{"max_tokens": 600, "shuffle": True, "seed": 3, **kw})


def test_batches_respect_max_tokens_and_cover_once():
    s = sampler()
    batches = list(s)
    assert len(batches) == len(s)
    for b in batches:
        assert len(b) * max(s.src_lens[b].max(), s.tgt_lens[b].max()) <= 600
    assert sorted(i for b in batches for i in b) == list(range(1000))


def test_shuffle_deterministic_per_seed_and_epoch():
    a, b = sampler(), sampler()
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first and len(list(a)) == len(first)
    assert list(sampler(seed=4)) != first
    fixed = sampler(shuffle=False)
    ordered = list(fixed)
    fixed.set_epoch(5)
    assert list(fixed) == ordered
    tgt = [fixed.tgt_lens[b].max() for b in ordered]
    assert tgt == sorted(tgt), "unshuffled batches come in length order"


@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_get_disjoint_equal_shards(drop_last):
    whole = list(sampler())
    ranks = [sampler(num_replicas=2, rank=r, drop_last=drop_last) for r in (0, 1)]
    shards = [list(r) for r in ranks]
    assert len(shards[0]) == len(shards[1]) == len(ranks[0]) == len(ranks[1])
    seen = [i for shard in shards for b in shard for i in b]
    if drop_last:
        assert len(seen) == len(set(seen)), "ranks never share a sentence"
        assert len(whole) - 2 * len(shards[0]) <= 1
    else:
        assert set(seen) == set(range(1000))
        padded = 2 * len(shards[0]) - len(whole)  # batches repeated from the start to even out the ranks
        assert padded in (0, 1) and len(seen) - 1000 == sum(len(b) for b in whole[:padded])
        assert [tuple(b) for b in shards[0]] == [tuple(b) for b in (whole + whole[:padded])[0::2]]


def test_bucketing_pads_less_than_random_batching():
    s = sampler()
    batches = list(s)

    def pad_fraction(bs):
        real = sum(int(s.src_lens[b].sum() + s.tgt_lens[b].sum()) for b in bs)
        total = sum(len(b) * int(s.src_lens[b].max() + s.tgt_lens[b].max()) for b in bs)
        return 1 - real / total

    perm, rand, start = np.random.default_rng(0).permutation(1000), [], 0
    for b in batches:  # same batch sizes, random members
        rand.append(perm[start : start + len(b)])
        start += len(b)
    assert pad_fraction(batches) < 0.1 < 0.3 < pad_fraction(rand)


def test_batches_do_not_depend_on_python_hash_seed():
    """Every DDP worker is its own process; they must agree on the batches without sharing hash() salts."""
    code = (
        "import numpy as np; from ablate.batching import TokenBucketBatchSampler as S; "
        "rng = np.random.default_rng(0); src = rng.integers(2, 60, 1000); "
        "tgt = np.clip(src + rng.integers(-5, 6, 1000), 2, 60); "
        "s = S(src, tgt, max_tokens=600, shuffle=True, seed=3); s.set_epoch(2); print(list(s))"
    )  # the same lengths as lengths(); importing this test module would pull in Lightning (slow)
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    here = sampler()
    here.set_epoch(2)
    assert out.stdout.strip() == str(list(here))


def test_empty_split():
    s = TokenBucketBatchSampler([], [], max_tokens=10, shuffle=True, seed=0, num_replicas=2, rank=1)
    assert len(s) == 0 and list(s) == []


def test_sentence_longer_than_max_tokens_is_an_error():
    with pytest.raises(ValueError, match="data.max_tokens=10 cannot hold a sentence of 12 tokens"):
        TokenBucketBatchSampler([3, 12], [4, 5], max_tokens=10, shuffle=False, seed=0)


# -- DataModule ------------------------------------------------------------------------------


@pytest.fixture
def datamodule(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_corpus(folder, "train", 300, seed=0)
    src, tgt = corpus(30, seed=1)
    write(folder / "valid.en", src[:10] + [""] + src[10:])  # an empty pair: idx must still align with raw()
    write(folder / "valid.de", tgt[:10] + ["leer"] + tgt[10:])
    prefixes = dict(train_prefix=str(folder / "train"), valid_prefix=str(folder / "valid"))
    cfg = ExperimentConfig(seed=7, data=data_cfg(tmp_path, max_len=80, max_tokens=240, **prefixes))
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_datamodule_batches_and_raw_alignment(datamodule):
    dm = datamodule
    assert dm.tokenizer.vocab_size == 64
    for batch in dm.train_dataloader():
        b, s = batch["src"].shape
        assert batch["tgt_in"].shape == batch["tgt_out"].shape and batch["idx"].shape == (b,)
        assert b * max(s, batch["tgt_in"].shape[1]) <= 240
    srcs, refs = dm.raw("valid")
    assert len(srcs) == len(refs) == 30
    seen = []
    for batch in dm.val_dataloader():
        for i, src_ids, tgt_ids in zip(batch["idx"].tolist(), batch["src"], batch["tgt_out"]):
            assert dm.tokenizer.decode([src_ids])[0] == srcs[i]
            assert dm.tokenizer.decode([tgt_ids])[0] == refs[i]
            seen.append(i)
    assert sorted(seen) == list(range(30))


class _Recorder(L.LightningModule):
    """Records the sentence indices of every training batch, per epoch."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.seen: dict[int, list[list[int]]] = {}

    def training_step(self, batch, batch_idx):
        self.seen.setdefault(self.current_epoch, []).append(batch["idx"].tolist())
        return self.w.sum() * batch["src"].float().mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore:.*LeafSpec:FutureWarning")  # Lightning-internal chatter
def test_lightning_advances_the_shuffle_each_epoch(datamodule):
    model = _Recorder()
    trainer = L.Trainer(
        max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, use_distributed_sampler=False, limit_val_batches=0,
    )  # fmt: skip
    trainer.fit(model, datamodule=datamodule)
    expected = datamodule.train_dataloader().batch_sampler
    for epoch in (0, 1):
        expected.set_epoch(epoch)
        assert model.seen[epoch] == [[int(datamodule.encoded("train").idx[j]) for j in b] for b in expected]
    assert model.seen[0] != model.seen[1]
