"""Encoding pairs into batches and token-bucketed batch sampling (shuffling, sharding, padding)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from text_corpora import data_cfg, write_corpus

from ablate.data.module import TokenBucketBatchSampler, collate, encode_pairs, load_or_train_tokenizer, make_loader
from ablate.model.tokens import BOS_ID as BOS
from ablate.model.tokens import EOS_ID as EOS
from ablate.model.tokens import PAD_ID as PAD


@pytest.fixture
def train_files(tmp_path):
    return write_corpus(tmp_path, "train", 300)


def test_encode_pairs_drop_or_truncate_and_collate(tmp_path, train_files):
    tok = load_or_train_tokenizer(data_cfg(tmp_path), *train_files)
    pairs = [("the dog", "der hund"), (" ".join(["the big red dog"] * 10), "der hund"), ("a cat", "eine katze")]
    kept = encode_pairs(tok, pairs, max_len=12)
    assert kept.idx.tolist() == [0, 2] and kept.overlong == 1
    cut = encode_pairs(tok, pairs, max_len=12, overlong="truncate", src_cap=12)
    assert cut.idx.tolist() == [0, 1, 2] and cut.src_lens.max() == 12 and cut.overlong == 1
    # Evaluation cuts a source only at the model's bound (none: read whole, as `ablate translate` reads it).
    whole = encode_pairs(tok, pairs, max_len=12, overlong="truncate")
    assert whole.src_lens.tolist() == [len(ids) + 1 for ids in tok.encode([s for s, _ in pairs])]
    assert whole.src_lens.max() > 12 and whole.tgt_lens.max() <= 11 and whole.overlong == 1

    batch = collate([cut[0], cut[1]])
    s, t = tok.encode(["the dog"])[0], tok.encode(["der hund"])[0]
    assert batch["src"].shape == (2, 12) and batch["src"].dtype == torch.long
    assert batch["src"][0].tolist() == s + [EOS] + [PAD] * (12 - len(s) - 1)
    assert batch["tgt_in"][0, : len(t) + 1].tolist() == [BOS] + t
    assert batch["tgt_out"][0, : len(t) + 1].tolist() == t + [EOS]
    assert batch["tgt_in"].shape == batch["tgt_out"].shape and batch["idx"].tolist() == [0, 1]
    assert batch["src_tokens"] == int((batch["src"] != PAD).sum()) == len(s) + 1 + 12
    assert batch["tgt_tokens"] == 2 * (len(t) + 1)


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


@pytest.mark.parametrize("replicas", [1, 2])
def test_an_epoch_keeps_whole_accumulation_windows(replicas):
    """With accumulate 4 every rank's epoch is a multiple of 4 batches, so every optimizer step is a full window and
    validation every N steps (Lightning counts 4N batches) falls on a step boundary; the few batches left over are
    other ones each epoch, so no sentence is left out for good."""
    n = len(sampler(num_replicas=replicas))
    assert n % 4 != 0, "the corpus must leave a partial window for this test to mean anything"
    s = sampler(accumulate=4, num_replicas=replicas)
    assert len(s) == n - n % 4 and len(list(s)) == len(s)
    seen = set()
    for epoch in range(6):
        s.set_epoch(epoch)
        seen |= {i for b in s for i in b}
    assert seen == set(range(1000)) or replicas > 1  # (a rank sees only its shard)
    assert len(sampler(accumulate=4, num_replicas=replicas, max_tokens=100_000)) == len(sampler(num_replicas=replicas, max_tokens=100_000))


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


@pytest.mark.slow  # subprocesses importing ablate: seconds; the default set stays under a minute
def test_batches_do_not_depend_on_python_hash_seed():
    """Every DDP worker is its own process; they must agree on the batches without sharing hash() salts."""
    code = (
        "import numpy as np; from ablate.data.batching import TokenBucketBatchSampler as S; "
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


def test_an_evaluation_source_longer_than_max_tokens_is_a_batch_of_its_own(tmp_path, train_files):
    """Evaluation reads a source whole (data.max_len cuts only training pairs): one past data.max_tokens is decoded
    alone, where the sampler refused it and the run stopped at its first validation."""
    singles = TokenBucketBatchSampler([3, 12, 2, 4], [4, 5, 3, 2], max_tokens=10, shuffle=False, seed=0, singles=True)
    assert [1] in list(singles) and sorted(i for b in singles for i in b) == [0, 1, 2, 3]
    tok = load_or_train_tokenizer(data_cfg(tmp_path), *train_files)
    pairs = [("the dog", "der hund"), (" ".join(["the big red dog"] * 10), "der hund"), ("a cat", "eine katze")]
    loader = make_loader(encode_pairs(tok, pairs, max_len=12, overlong="truncate"), max_tokens=14, shuffle=False)
    batches = list(loader)
    assert [1] in [b["idx"].tolist() for b in batches] and sum(len(b["idx"]) for b in batches) == 3
    assert max(b["src"].shape[1] for b in batches) > 14  # the long source, whole


def _samples(rng, lengths):
    return [(i, rng.integers(4, 60, s), rng.integers(4, 60, t)) for i, (s, t) in enumerate(lengths)]


def test_collate_carries_the_real_target_positions_found_on_the_host():
    """keep_index / target let the loss select real targets with no boolean indexing on the device."""
    batch = collate(_samples(np.random.default_rng(0), [(3, 5), (7, 2), (4, 4)]))
    keep = batch["tgt_out"] != PAD
    assert torch.equal(batch["keep_index"], keep.flatten().nonzero().flatten())
    assert torch.equal(batch["target"], batch["tgt_out"][keep])
    assert batch["tgt_tokens"] == int(keep.sum()) == len(batch["keep_index"]) == 6 + 3 + 5
    assert isinstance(batch["tgt_tokens"], int) and isinstance(batch["src_tokens"], int)


def test_pad_multiple_rounds_lengths_up_and_changes_no_loss():
    from helpers import tiny_model

    from ablate.model import build_transformer
    from ablate.model.loss import translation_loss

    samples = _samples(np.random.default_rng(1), [(3, 5), (7, 2), (4, 4)])
    plain, padded = collate(samples), collate(samples, pad_multiple=8)
    assert plain["src"].shape == (3, 7) and plain["tgt_in"].shape == (3, 6)
    assert padded["src"].shape == (3, 8) and padded["tgt_in"].shape == (3, 8) and padded["tgt_out"].shape == (3, 8)
    assert {k: padded[k] for k in ("src_tokens", "tgt_tokens")} == {k: plain[k] for k in ("src_tokens", "tgt_tokens")}
    torch.manual_seed(0)
    model = build_transformer(tiny_model(), 64).eval()
    with torch.no_grad():
        a, b = translation_loss(model, plain, 0.1), translation_loss(model, padded, 0.1)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)


def _collate_row_by_row(samples, pad_multiple=1) -> dict:
    """The batch written out sentence by sentence: what collate's whole-batch writes must equal."""
    b = len(samples)
    s_len = -(-max(len(s) for _, s, _ in samples) // pad_multiple) * pad_multiple
    t_len = -(-(max(len(t) for _, _, t in samples) + 1) // pad_multiple) * pad_multiple
    src, tgt_in, tgt_out = (torch.full((b, n), PAD, dtype=torch.long) for n in (s_len, t_len, t_len))
    for row, (_, s, t) in enumerate(samples):
        src[row, : len(s)] = torch.as_tensor(s, dtype=torch.long)
        tgt_in[row, 0] = BOS
        tgt_in[row, 1 : len(t) + 1] = torch.as_tensor(t, dtype=torch.long)
        tgt_out[row, : len(t)] = torch.as_tensor(t, dtype=torch.long)
        tgt_out[row, len(t)] = EOS
    return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out}


@pytest.mark.parametrize("pad_multiple", [1, 8])
def test_collate_equals_the_batch_written_row_by_row(pad_multiple):
    rng = np.random.default_rng(7)
    shapes = [(int(rng.integers(1, 40)), int(rng.integers(0, 40))) for _ in range(57)] + [(1, 0), (40, 0)]
    samples = [(i, s.astype(np.int32), t.astype(np.int32)) for i, s, t in _samples(rng, shapes)]  # EncodedSplit's dtype
    batch, expected = collate(samples, pad_multiple), _collate_row_by_row(samples, pad_multiple)
    for key in ("src", "tgt_in", "tgt_out"):
        assert batch[key].dtype == torch.long and torch.equal(batch[key], expected[key]), key
    keep = expected["tgt_out"] != PAD
    assert torch.equal(batch["keep_index"], keep.flatten().nonzero().flatten())
    assert torch.equal(batch["target"], expected["tgt_out"][keep])
    assert batch["tgt_tokens"] == sum(t + 1 for _, t in shapes) and batch["src_tokens"] == sum(s for s, _ in shapes)
    assert torch.equal(batch["idx"], torch.arange(len(shapes)))
