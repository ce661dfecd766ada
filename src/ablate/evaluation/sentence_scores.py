"""Per-sentence scores of a split: the fixed random subset a study decodes, beam-search output of a batch's rows,
and each reference's teacher-forced NLL (the per-sentence records of `ablate.evaluation.records`; BLEU as in Sec. 6.1).

Plain functions with no Lightning import: validation (`ablate.training.module`), the end-of-run record (`ablate.run.evaluation`)
and `ablate table --split test` (`ablate.table.checkpoint_scoring`) share them, so all three score sentences the same way.
"""

from __future__ import annotations

import functools
import hashlib

import torch
from torch import Tensor

from ablate.evaluation.search import beam_search
from ablate.model import max_length
from ablate.model.tokens import PAD_ID

BATCH_SENTENCES = 64


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


def bleu_rows(total: int, t) -> frozenset[int] | None:
    """The validation sentences val/bleu is on (`t`: the train config): a fixed random sample of
    t.val_max_sentences (the same for every trial of a study, not the N shortest), or None for all of them."""
    chosen = fixed_subset(total, t.val_max_sentences, t.val_subset_seed)
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


def decode_rows(model, src: Tensor, cfg, width: int | None = None) -> list[list[int]]:
    """Beam search on `src` (B, S) with the run's decoding settings (`cfg.train`), as validation decodes for val/bleu.

    Columns that are padding in every row (left behind when rows of a batch are left out) are cut first: they only
    cost time. A caller that knows how many columns the rows fill (`width`, from `host_rows`) spares the device read.
    """
    t = cfg.train
    width = filled_width(src) if width is None else width
    src = src[:, :width] if width else src  # (B, S')
    return beam_search(model, src, t.beam_size, t.length_penalty, t.max_len_a, t.max_len_b, max_length(cfg.model))


@torch.no_grad()
def sentence_nll(model, batch: dict) -> tuple[Tensor, Tensor]:
    """Each sentence's summed NLL (nats) of its reference, teacher-forced, without label smoothing, and its number
    of target tokens (EOS included): (B,) and (B,). Sums to `ablate.model.loss.translation_loss`'s NLL over the batch."""
    logits = model(batch["src"], batch["tgt_in"])  # (B, T, V)
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    keep = batch["tgt_out"] != PAD_ID  # (B, T)
    nll = -logp.gather(-1, batch["tgt_out"].unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (nll * keep).sum(dim=1), keep.sum(dim=1)


def split_nll(model, encoded, device: torch.device) -> tuple[list[float], list[int]]:
    """`sentence_nll` of every pair of an `EncodedSplit`, in its order; batches of similar length."""
    from ablate.data.batching import collate

    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][2]))
    nll, tokens = [0.0] * len(encoded), [0] * len(encoded)
    for start in range(0, len(order), BATCH_SENTENCES):
        rows = order[start : start + BATCH_SENTENCES]
        batch = collate([encoded[i] for i in rows])
        s, n = sentence_nll(model, {k: batch[k].to(device) for k in ("src", "tgt_in", "tgt_out")})
        for i, a, b in zip(rows, s.tolist(), n.tolist()):
            nll[i], tokens[i] = a, int(b)
    return nll, tokens
