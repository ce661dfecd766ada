"""ablate.model.loss for a member model: each member's smoothed loss, NLL and token count, on accelerators from one
pass over all members (on CPU member by member: ablate.model.member_loop).

A member batch selects each member's real target positions as a (K, M) index, M the most any member has; a member
with fewer fills its tail with slots of weight 0 (`batch["slot_weight"]`), which no sum or gradient counts. Every
member has its own label smoothing (`smoothing`, (K,)) and its own output weight (tied to its own embeddings or not).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ablate.model.loss import upcast
from ablate.model.member_loop import looped_member_loss, member_by_member


def _terms(logp: Tensor, target: Tensor, weight: Tensor, smoothing: Tensor) -> tuple[Tensor, Tensor]:
    """Per-member summed smoothed loss and NLL (K,) from log-probabilities (K, M, V), targets and slot weights (K, M)."""
    nll = -(logp.gather(2, target[..., None]).squeeze(2) * weight).sum(1)
    uniform = -(logp.sum(2) * weight).sum(1) / logp.size(2)
    return (1 - smoothing) * nll + smoothing * uniform, nll


def _logits_grad_(logp: Tensor, target: Tensor, weight: Tensor, smoothing: Tensor) -> Tensor:
    """d loss_k / d logits = w * (softmax - (1 - eps_k) onehot(target) - eps_k / V), written over `logp`."""
    grad = logp.exp_()
    grad.sub_((smoothing / grad.size(2))[:, None, None])
    grad.scatter_add_(2, target[..., None], (smoothing - 1)[:, None, None].expand(*target.shape, 1).to(grad.dtype))
    return grad.mul_(weight[..., None])


class _MemberSmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, weight: Tensor, smoothing: Tensor) -> tuple[Tensor, Tensor]:
        logp = torch.log_softmax(upcast(logits), dim=-1)  # (K, M, V)
        weight, smoothing = weight.to(logp.dtype), smoothing.to(logp.dtype)
        loss, nll = _terms(logp, target, weight, smoothing)
        ctx.save_for_backward(logp, target, weight, smoothing)
        ctx.dtype = logits.dtype
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, None, None, None]:
        logp, target, weight, smoothing = ctx.saved_tensors
        grad = _logits_grad_(logp, target, weight, smoothing).mul_(grad_loss.to(logp.dtype)[:, None, None])
        return grad.to(ctx.dtype), None, None, None


def member_translation_loss(model, batch: dict, smoothing: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """A member batch's per-member summed smoothed loss, summed NLL and real target-token count, each (K,).

    On CPU member by member, each through its own run's `translation_loss` (ablate.model.member_loop says why);
    elsewhere one pass for all members, whose operations do not depend on K.
    """
    if member_by_member(batch["src"]):
        return looped_member_loss(model, batch, smoothing)
    logits = model(batch["src"], batch["tgt_in"], keep=batch["keep_index"])  # (K, M, V)
    loss, nll = _MemberSmoothedNLL.apply(logits, batch["target"], batch["slot_weight"], smoothing)
    return loss, nll, batch["member_tokens"]
