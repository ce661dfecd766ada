"""Member models for tests of ablate.model.members and ablate.model.member_loop: K tiny ordinary models and the member
model holding their weights, each member's own batch, and the path accelerators take, forced on this CPU."""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, random_batch

from ablate.model import build_transformer
from ablate.model.members import stack_state_dicts


def members_of(cfg, k: int, dtype=torch.float64):
    """K ordinary models (seeds 0..K-1) and the member model holding their weights."""
    plains = []
    for seed in range(k):
        torch.manual_seed(seed)
        plains.append(build_transformer(cfg, VOCAB).to(dtype))
    group = build_transformer(cfg, VOCAB, members=k).to(dtype)
    group.load_state_dict(stack_state_dicts([p.state_dict() for p in plains]))
    return plains, group


def own_batches(k: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One batch per member, each of its own shape."""
    torch.manual_seed(100 + seed)
    return [random_batch(b=2 + i % 3, s=5 + i, t=4 + 2 * (i % 2)) for i in range(k)]


def samples_of(src: torch.Tensor, tgt: torch.Tensor) -> list:
    """EncodedSplit-like items (idx, source ids with eos, target ids) from a random batch."""
    items = []
    for i in range(src.size(0)):
        s, t = src[i][src[i] != 0].numpy(), tgt[i][tgt[i] != 0].numpy()
        items.append((i, s, t))
    return items


def collated(batches):
    from ablate.data.batching import collate
    from ablate.data.member_batches import collate_members

    samples = [samples_of(s, t) for s, t in batches]
    return [collate(s) for s in samples], collate_members(samples)


def batched_everywhere(patch: pytest.MonkeyPatch) -> None:
    """The path every accelerator takes, on this CPU: one pass for all members (ablate.model.member_loop)."""
    import ablate.model.member_loss

    patch.setattr(ablate.model.member_loss, "member_by_member", lambda src: False)
