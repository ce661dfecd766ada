"""One batch for a member model from each member's own batch (ablate.model.members).

Member k's sentences take rows k*B .. k*B+B-1 of the group's (K*B, S) and (K*B, T) tensors, B, S and T the most any
member's batch has; a member with fewer sentences gets rows of padding only, which no loss reads (see
ablate.model.transformer.key_mask). Each member's real target positions are a row of a (K, M) index, padded with
slots of weight 0, so the loss and its gradient count exactly the member's own tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ablate.data.batching import collate
from ablate.model.tokens import PAD_ID


def _pad(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    out = torch.full((rows, cols), PAD_ID, dtype=t.dtype)
    out[: t.size(0), : t.size(1)] = t
    return out


def collate_members(batches: Sequence[Sequence[tuple[int, np.ndarray, np.ndarray]]], pad_multiple: int = 1) -> dict:
    """K lists of EncodedSplit items (one batch per member) -> one member batch.

    Besides the tensors `collate` gives (member-major), `keep_index`/`target`/`slot_weight` are (K, M), `member_tokens`
    the (K,) real target tokens (`member_tgt_tokens` as ints), `idx` one (B_k,) tensor per member, and `padded` the share of the group's
    source and target positions that are padding (what batching members together costs).
    """
    members = [collate(samples, pad_multiple) for samples in batches]
    k = len(members)
    b = max(m["src"].size(0) for m in members)
    s = max(m["src"].size(1) for m in members)
    t = max(m["tgt_in"].size(1) for m in members)
    src = torch.cat([_pad(m["src"], b, s) for m in members])  # (K*B, S)
    tgt_in = torch.cat([_pad(m["tgt_in"], b, t) for m in members])  # (K*B, T)
    tgt_out = torch.cat([_pad(m["tgt_out"], b, t) for m in members])
    counts = [m["tgt_tokens"] for m in members]
    slots = max(counts)
    keep_index = torch.zeros(k, slots, dtype=torch.long)
    target = torch.zeros(k, slots, dtype=torch.long)
    slot_weight = torch.zeros(k, slots)
    for i, m in enumerate(members):
        # Member i's flat positions in its own (B_i, T_i) batch, moved to its rows of the group's (K*B, T) layout.
        rows, cols = m["keep_index"] // m["tgt_in"].size(1), m["keep_index"] % m["tgt_in"].size(1)
        n = counts[i]
        keep_index[i, :n] = (i * b + rows) * t + cols
        keep_index[i, n:] = i * b * t  # a real position of this member's rows; weight 0 below
        target[i, :n] = m["target"]
        slot_weight[i, :n] = 1.0
    real_src = sum(m["src_tokens"] for m in members)
    return {
        "src": src,
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "idx": [m["idx"] for m in members],
        "keep_index": keep_index,
        "target": target,
        "slot_weight": slot_weight,
        "member_tokens": torch.tensor(counts, dtype=torch.long),
        "member_tgt_tokens": counts,  # the same as ints, for host-side counts that must not wait on a device
        "src_tokens": real_src,
        "tgt_tokens": sum(counts),
        "padded": 1.0 - (real_src + sum(counts)) / (src.numel() + tgt_out.numel()),
    }


def tile_batch(batch: dict, members: int) -> dict:
    """One ordinary batch given to every member (validation: each member scores the same sentences)."""
    b, t = batch["tgt_in"].shape
    n = batch["keep_index"].numel()
    offsets = torch.arange(members, dtype=torch.long)[:, None] * (b * t)  # (K, 1): member k's rows start at k*B
    return {
        **batch,
        "src": batch["src"].repeat(members, 1),
        "tgt_in": batch["tgt_in"].repeat(members, 1),
        "tgt_out": batch["tgt_out"].repeat(members, 1),
        "keep_index": batch["keep_index"][None, :] + offsets,
        "target": batch["target"][None, :].expand(members, n).contiguous(),
        "slot_weight": torch.ones(members, n),
        "member_tokens": torch.full((members,), n, dtype=torch.long),
    }
