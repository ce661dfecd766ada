"""Which validation sentences a study decodes for val/bleu and its evaluation records: one fixed random subset, the
same for every trial on any machine, picked here for data loading, validation and a run's end alike (issue 39: it was
computed in three places), and found in a batch's rows on the host, before the batch moves to the device."""

from __future__ import annotations

import functools
import hashlib

import torch
from torch import Tensor

from ablate.model.tokens import PAD_ID


def fixed_subset(total: int, n: int, seed: int) -> list[int] | None:
    """A fixed random sample of `n` of a split's `total` sentence indices, ascending; None when `n` is 0 or covers them all.

    The sample is the `n` indices with the smallest hash of (seed, index): it depends on nothing but its arguments
    (no RNG whose algorithm a library update could change, not the run's seed), so every trial of a study, on any
    machine, scores the same sentences, and a larger `n` keeps the sentences of a smaller one.
    """
    if n <= 0 or n >= total:
        return None

    def key(i: int) -> bytes:
        return hashlib.blake2b(f"{seed}:{i}".encode(), digest_size=8).digest()

    return sorted(sorted(range(total), key=key)[:n])


def validation_subset(total: int, t) -> list[int] | None:
    """The validation sentences val/bleu and a run's evaluation record are on (`t`: the train config): a fixed random
    sample of t.val_max_sentences (the same for every trial of a study, not the N shortest), or None for all."""
    return fixed_subset(total, t.val_max_sentences, t.val_subset_seed)


def bleu_rows(total: int, t) -> frozenset[int] | None:
    """`validation_subset` as a set, for finding its sentences in batches (`row_mask`, `host_rows`)."""
    chosen = validation_subset(total, t)
    return None if chosen is None else frozenset(chosen)


@functools.lru_cache(maxsize=8)
def subset_lookup(chosen: frozenset[int], device: torch.device) -> Tensor:
    """(max index + 1,) bool, True at the subset's indices: built once per subset and device (a frozenset caches its
    hash, so finding it again costs nothing)."""
    lookup = torch.zeros(max(chosen, default=0) + 1, dtype=torch.bool)
    lookup[list(chosen)] = True
    return lookup.to(device)


def row_mask(idx: Tensor, chosen: frozenset[int] | None) -> Tensor:
    """Which rows of a batch (by `batch["idx"]`, (B,)) are in the subset: (B,) bool; all of them when `chosen` is None.

    A lookup table on `idx`'s device answers without reading `idx` on the host: in validation it lives on the GPU.
    """
    if chosen is None:
        return torch.ones_like(idx, dtype=torch.bool)
    lookup = subset_lookup(chosen, idx.device)
    return lookup[idx.clamp(max=lookup.numel() - 1)] & (idx < lookup.numel())  # (B,)


def filled_width(src: Tensor) -> int:
    """The columns of `src` (B, S) up to the last that holds a real token in some row (0 when none does): one read."""
    position = torch.arange(1, src.size(1) + 1, device=src.device)  # (S,)
    return int(((src != PAD_ID).any(dim=0) * position).max()) if src.numel() else 0


def host_rows(batch: dict, chosen: frozenset[int] | None) -> dict:
    """What validation decodes of a batch still on the host (`batch["idx"]`, `batch["src"]` on the CPU), found before
    it moves to the device so that picking the rows there reads nothing back: `rows`, their positions in the batch
    ((B',) long, for index_select), `idx`, their indices in the split (a list), and `width`, the columns they fill."""
    rows = row_mask(batch["idx"], chosen).nonzero().flatten()  # (B',)
    return {"rows": rows, "idx": batch["idx"][rows].tolist(), "width": filled_width(batch["src"][rows])}
