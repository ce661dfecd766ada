"""Token-bucketed batches (Sec. 5.1: "batched together by approximate sequence length ... approximately 25000
source tokens and 25000 target tokens" per batch).

Sequences: source = tokens + [eos]; target input = [bos] + tokens; target output = tokens + [eos].
Shapes: B sentences, S source length, T target length (both padded with PAD_ID=0).
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ablate.data.epoch_position import EpochPosition
from ablate.data.loader_workers import worker_init
from ablate.data.tokenizer import Tokenizer
from ablate.model.tokens import BOS_ID, EOS_ID, PAD_ID

log = logging.getLogger(__name__)

ENCODE_CHUNK = 100_000  # lines per SentencePiece call; bounds the temporary Python lists on WMT-sized splits


def _ragged(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(flat int32 values, int64 offsets): ~8x less memory than lists of Python ints on a 4.5M-pair corpus."""
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    values = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=int(offsets[-1]))
    return values, offsets


@dataclass(eq=False)  # compare by identity: == on numpy fields would be elementwise
class EncodedSplit(Dataset):
    """Encoded pairs; item i is (idx, source ids incl. eos, target ids without specials)."""

    src: np.ndarray
    src_offsets: np.ndarray
    tgt: np.ndarray
    tgt_offsets: np.ndarray
    idx: np.ndarray  # position of each pair in the split's kept raw pairs (what `raw(split)` returns)
    overlong: int = 0  # pairs with a side over max_len tokens: dropped (training) or truncated (evaluation)

    def __len__(self) -> int:
        return len(self.idx)

    def __getitem__(self, i: int) -> tuple[int, np.ndarray, np.ndarray]:
        s0, s1 = self.src_offsets[i], self.src_offsets[i + 1]
        t0, t1 = self.tgt_offsets[i], self.tgt_offsets[i + 1]
        return int(self.idx[i]), self.src[s0:s1], self.tgt[t0:t1]

    @property
    def src_lens(self) -> np.ndarray:
        return np.diff(self.src_offsets)  # includes eos

    @property
    def tgt_lens(self) -> np.ndarray:
        return np.diff(self.tgt_offsets) + 1  # tgt_in / tgt_out carry one bos / eos


def encode_pairs(
    tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]], max_len: int, overlong: str = "drop", src_cap: int | None = None
) -> EncodedSplit:
    """Encode pairs; a side longer than `max_len` tokens (incl. eos) is dropped ('drop') or cut ('truncate').

    Training drops long pairs; evaluation keeps them, so BLEU is still computed on every reference: it cuts a target
    at `max_len` and a source only at `src_cap` (the model's own bound, ablate.model.max_length; None: none), as
    `ablate translate` does, so a run's validation and `ablate evaluate` of its checkpoint decode the same sources, and
    a source longer than any trained on (train.eval_longer_than) is read whole.
    """
    if overlong not in ("drop", "truncate"):
        raise ValueError(f"overlong='{overlong}' is not one of ['drop', 'truncate']")
    src_all, tgt_all, idx, n_long = [], [], [], 0
    for start in range(0, len(pairs), ENCODE_CHUNK):
        chunk = pairs[start : start + ENCODE_CHUNK]
        src_ids = tokenizer.encode([s for s, _ in chunk])
        tgt_ids = tokenizer.encode([t for _, t in chunk])
        for i, (s, t) in enumerate(zip(src_ids, tgt_ids), start):
            if max(len(s), len(t)) + 1 > max_len:
                n_long += 1
                if overlong == "drop":
                    continue
                s, t = s[: None if src_cap is None else src_cap - 1], t[: max_len - 1]
            src_all.append(s + [EOS_ID])
            tgt_all.append(t)
            idx.append(i)
    src, src_offsets = _ragged(src_all)
    tgt, tgt_offsets = _ragged(tgt_all)
    return EncodedSplit(src, src_offsets, tgt, tgt_offsets, np.asarray(idx, dtype=np.int64), n_long)


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _scatter_rows(values: list[np.ndarray], lens: np.ndarray, out: np.ndarray, first_col: int = 0) -> None:
    """Write each row's values into out[row, first_col : first_col + len] in one indexed assignment."""
    rows = np.repeat(np.arange(len(lens)), lens)
    starts = np.repeat(np.cumsum(lens) - lens, lens)
    out[rows, np.arange(len(rows)) - starts + first_col] = np.concatenate(values)


def collate(samples: Sequence[tuple[int, np.ndarray, np.ndarray]], pad_multiple: int = 1) -> dict:
    """Pad a list of EncodedSplit items into a batch dict of LongTensors, lengths rounded up to `pad_multiple`.

    Whole-batch numpy writes, not a loop over sentences: on a GPU the training process collates while the device waits
    (21 ms of an H200 machine's host time, under cProfile, for a 4,096-token batch with the loop, against 4.4 ms of
    device work a step)."""
    b = len(samples)
    s_lens = np.fromiter((len(s) for _, s, _ in samples), dtype=np.int64, count=b)
    t_lens = np.fromiter((len(t) for _, _, t in samples), dtype=np.int64, count=b)
    s_len = _round_up(int(s_lens.max()), pad_multiple)
    t_len = _round_up(int(t_lens.max()) + 1, pad_multiple)
    src = np.full((b, s_len), PAD_ID, dtype=np.int64)  # (B, S)
    tgt_in = np.full((b, t_len), PAD_ID, dtype=np.int64)  # (B, T)
    tgt_out = np.full((b, t_len), PAD_ID, dtype=np.int64)  # (B, T)
    targets = [t for _, _, t in samples]
    _scatter_rows([s for _, s, _ in samples], s_lens, src)
    tgt_in[:, 0] = BOS_ID
    _scatter_rows(targets, t_lens, tgt_in, first_col=1)
    _scatter_rows(targets, t_lens, tgt_out)
    tgt_out[np.arange(b), t_lens] = EOS_ID
    keep_index = np.flatnonzero(tgt_out != PAD_ID)  # (N,) flat in B*T, row-major
    return {
        "src": torch.from_numpy(src),
        "tgt_in": torch.from_numpy(tgt_in),
        "tgt_out": torch.from_numpy(tgt_out),
        "idx": torch.tensor([i for i, _, _ in samples], dtype=torch.long),  # (B,)
        # The real target positions (flat in B*T) and their ids, found here on the host: selecting them on the device
        # with a boolean mask would make the training step wait for the mask's count (see ablate.model.loss).
        "keep_index": torch.from_numpy(keep_index),
        "target": torch.from_numpy(tgt_out.reshape(-1)[keep_index]),  # (N,)
        "src_tokens": int((src != PAD_ID).sum()),
        "tgt_tokens": len(keep_index),
    }


class TokenBucketBatchSampler(Sampler[list[int]]):
    """Length-sorted batches of at most `max_tokens` tokens per side, padding included.

    Sorted by target then source length (random tie-breaking when shuffling) and cut greedily, so padding is small;
    with `shuffle` the batch order is drawn from a generator seeded by (seed, epoch). Under DDP each of
    `num_replicas` ranks takes every num_replicas-th batch of the same list; the list is padded by repeating from its
    start (or cut, with drop_last) so every rank gets the same number of batches, as DistributedSampler does.
    With `singles` (evaluation, which keeps every pair and reads a source whole) a sentence longer than `max_tokens`
    is a batch of its own rather than refused.
    With gradient accumulation an epoch keeps a whole number of `accumulate`-batch windows (the last < accumulate
    batches, a different few each shuffled epoch, wait for the next), so every optimizer step is a full window and
    validation every N steps, which Lightning counts in batches, falls on a step boundary in every epoch.
    """

    def __init__(
        self,
        src_lens: Sequence[int],
        tgt_lens: Sequence[int],
        max_tokens: int,
        shuffle: bool,
        seed: int,
        num_replicas: int = 1,
        rank: int = 0,
        drop_last: bool = False,
        accumulate: int = 1,
        singles: bool = False,
    ):
        self.src_lens = np.asarray(src_lens, dtype=np.int64)
        self.tgt_lens = np.asarray(tgt_lens, dtype=np.int64)
        if self.src_lens.shape != self.tgt_lens.shape:
            raise ValueError(f"{len(self.src_lens)} source lengths but {len(self.tgt_lens)} target lengths")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank={rank} must be in [0, num_replicas={num_replicas})")
        longest = int(np.maximum(self.src_lens, self.tgt_lens).max(initial=0))
        if longest > max_tokens and not singles:
            hint = "raise it or lower data.max_len"
            raise ValueError(f"data.max_tokens={max_tokens} cannot hold a sentence of {longest} tokens; {hint}")
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.num_replicas, self.rank, self.drop_last, self.accumulate = num_replicas, rank, drop_last, accumulate
        self.epoch = 0
        self.sampler = EpochPosition(self)  # Lightning's set_epoch goes to batch_sampler.sampler; the resume point
        self.sorted_order = np.lexsort((self.src_lens, self.tgt_lens))  # stable: target, then source, then index
        # (start, end) of each bucket in a length-sorted order. Random tie-breaking only permutes pairs of equal (tgt,
        # src) length, so these cut points hold every epoch, and for any seed's order (epoch_order).
        self.bounds = self._cut(self.src_lens[self.sorted_order], self.tgt_lens[self.sorted_order])

    def _cut(self, src: np.ndarray, tgt: np.ndarray) -> list[tuple[int, int]]:
        bounds, start, s_max, t_max = [], 0, 0, 0
        for i, (s, t) in enumerate(zip(src.tolist(), tgt.tolist())):
            s_max2, t_max2 = max(s_max, s), max(t_max, t)
            if i > start and (i - start + 1) * max(s_max2, t_max2) > self.max_tokens:
                bounds.append((start, i))
                start, s_max2, t_max2 = i, s, t
            s_max, t_max = s_max2, t_max2
        if len(src) > start:
            bounds.append((start, len(src)))
        return bounds

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def epoch_order(self, seed: int) -> tuple[np.ndarray, np.random.Generator]:
        """The length-sorted order of this epoch for `seed` (ties broken at random), and the generator, drawn on, that
        goes on to shuffle the buckets. SeedSequence mixes (seed, epoch) the same way in every process; no dependence
        on Python's hash()."""
        rng = np.random.default_rng([seed % 2**63, self.epoch])
        return np.lexsort((rng.random(len(self.src_lens)), self.src_lens, self.tgt_lens)), rng

    def batches(self) -> list[list[int]]:
        """This epoch's batches, every one of them (before sharding across ranks, accumulation windows and a resume)."""
        order, rng = self.epoch_order(self.seed) if self.shuffle else (self.sorted_order, None)
        batches = [order[a:b].tolist() for a, b in self.bounds]
        if rng is not None:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.sampler.untrained(self._this_epoch())  # computed as a batch is first drawn (EpochPosition)

    def _this_epoch(self) -> list[list[int]]:
        batches = self.batches()
        if self.num_replicas > 1 and batches:
            total = len(self) * self.num_replicas
            if total > len(batches):
                batches = (batches * math.ceil(total / len(batches)))[:total]
            batches = batches[:total][self.rank :: self.num_replicas]
        return batches[: len(self)]  # whole accumulation windows

    def __len__(self) -> int:
        n = len(self.bounds)
        if self.num_replicas > 1:
            n = n // self.num_replicas if self.drop_last else math.ceil(n / self.num_replicas)
        return n - n % self.accumulate if n >= self.accumulate else n  # fewer than one window: kept, a short step


def make_loader(
    encoded: EncodedSplit,
    max_tokens: int,
    shuffle: bool,
    seed: int = 0,
    num_replicas: int = 1,
    rank: int = 0,
    num_workers: int = 0,
    pin_memory: bool = False,
    accumulate: int = 1,
    pad_multiple: int = 1,
) -> DataLoader:
    """A DataLoader of token-bucketed batches over `encoded`; works without Lightning (benchmarks, `evaluate`)."""
    sampler = TokenBucketBatchSampler(
        encoded.src_lens,
        encoded.tgt_lens,
        max_tokens,
        shuffle=shuffle,
        seed=seed,
        num_replicas=num_replicas,
        rank=rank,
        accumulate=accumulate,
        singles=not shuffle,  # an evaluation's loader: a source longer than max_tokens is a batch alone
    )
    return DataLoader(
        encoded,
        batch_sampler=sampler,
        # Creating an iterator draws a seed from this generator, not from torch's global one, which dropout uses:
        # otherwise where a run is resumed (before or after an epoch's iterator exists) would change dropout masks.
        generator=torch.Generator().manual_seed(seed),
        collate_fn=collate if pad_multiple == 1 else functools.partial(collate, pad_multiple=pad_multiple),
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
        worker_init_fn=worker_init,  # stopping is the training process's (ablate.data.loader_workers)
        pin_memory=pin_memory,
    )
