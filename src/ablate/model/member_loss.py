"""ablate.model.loss for a member model: each member's smoothed loss, NLL and token count from one pass over all.

A member batch selects each member's real target positions as a (K, M) index, M the most any member has; a member
with fewer fills its tail with slots of weight 0 (`batch["slot_weight"]`), which no sum or gradient counts. Every
member has its own label smoothing (`smoothing`, (K,)) and its own output weight (tied to its own embeddings or not).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ablate.model.loss import chunked_loss_and_grads_, chunked_loss_applies, upcast


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


class _MemberLinearSmoothedNLL(torch.autograd.Function):
    """`_LinearSmoothedNLL` per member, on CPU: member k's real slots through its own output weight in the ordinary
    loss's cache-sized chunks, one member after another.

    One chunk of R rows for all K members at once (batched matmuls) measured slower on a CPU: its (K, R, V) logits
    leave the cache unless R shrinks, and a small R re-reads all K output weights and their gradients every chunk
    (table3-small, 8 members: the output layer and loss took 438 ms a step against 353 ms for the 8 runs). A member's
    chunks are exactly its own run's, so on a CPU the loss costs what the runs' losses cost; only the CPU takes this
    path (`chunked_loss_applies`), so the operations an accelerator dispatches still do not depend on K.
    """

    @staticmethod
    def forward(
        ctx, hidden: Tensor, out_weight: Tensor, target: Tensor, counts: list[int], smoothing: list[float]
    ) -> tuple[Tensor, Tensor]:
        grad_hidden, grad_weight = torch.empty_like(hidden), torch.zeros_like(out_weight)
        dtype = upcast(hidden[:0]).dtype
        loss, nll = hidden.new_zeros(len(counts), dtype=dtype), hidden.new_zeros(len(counts), dtype=dtype)
        for k, n in enumerate(counts):  # a member's real slots come first; its padded ones get no gradient
            grad_hidden[k, n:] = 0
            loss[k], nll[k] = chunked_loss_and_grads_(
                hidden[k, :n], out_weight[k], target[k, :n], smoothing[k], grad_hidden[k, :n], grad_weight[k]
            )
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, Tensor, None, None, None]:
        grad_hidden, grad_weight = ctx.saved_tensors
        scale = grad_loss.to(grad_hidden.dtype)[:, None, None]
        return grad_hidden * scale, grad_weight * scale, None, None, None


def member_translation_loss(model, batch: dict, smoothing: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """A member batch's per-member summed smoothed loss, summed NLL and real target-token count, each (K,).

    The same paths as `translation_loss`: chunked output layer when training on CPU in fp32, logits otherwise.
    """
    src, select, target, weight = batch["src"], batch["keep_index"], batch["target"], batch["slot_weight"]
    if chunked_loss_applies(src) and model.output.bias is None:
        hidden = model(src, batch["tgt_in"], keep=select, project=False)  # (K, M, D)
        counts, eps = batch["member_tokens"].tolist(), smoothing.tolist()  # the CPU path: no device to wait for
        loss, nll = _MemberLinearSmoothedNLL.apply(hidden, model.output.weight, target, counts, eps)
    else:
        logits = model(src, batch["tgt_in"], keep=select)  # (K, M, V)
        loss, nll = _MemberSmoothedNLL.apply(logits, target, weight, smoothing)
    return loss, nll, batch["member_tokens"]
