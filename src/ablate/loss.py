"""Label-smoothed cross entropy (Sec. 5.4) and the plain NLL for perplexity, from one log-softmax.

At an 8k-41k vocabulary the output softmax is a large share of a training step on CPU. `F.cross_entropy` with
label smoothing, plus a second call for the NLL that perplexity needs, passes over the (N, V) logits about eight
times and allocates several (N, V) temporaries; this does forward and backward in four passes, writing the
gradient into the saved log-probabilities.
"""

from __future__ import annotations

import torch
from torch import Tensor


class _SmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
        logp = torch.log_softmax(logits.float(), dim=-1)  # (N, V)
        nll = -logp.gather(1, target[:, None]).sum()
        uniform = -logp.sum() / logp.size(1)  # cross entropy against the uniform distribution, summed over rows
        ctx.save_for_backward(logp, target)
        ctx.smoothing, ctx.dtype, ctx.done = smoothing, logits.dtype, False
        ctx.mark_non_differentiable(nll)
        return (1 - smoothing) * nll + smoothing * uniform, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, None, None]:
        if ctx.done:
            raise RuntimeError("smoothed_nll reuses its saved tensors for the gradient; it can be backpropagated once")
        ctx.done = True
        logp, target = ctx.saved_tensors
        eps = ctx.smoothing
        grad = logp.exp_()  # softmax, in place: dloss/dlogits = p - (1 - eps) onehot(target) - eps / V
        grad.sub_(eps / grad.size(1))
        grad.scatter_add_(1, target[:, None], grad.new_full((grad.size(0), 1), -(1 - eps)))
        return grad.mul_(grad_loss).to(ctx.dtype), None, None


def smoothed_nll(logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL over rows of `logits` (N, V) with targets (N,); no padding rows.

    Equals `F.cross_entropy(logits, target, label_smoothing=smoothing, reduction="sum")` and the same with
    smoothing 0; only the first output carries a gradient.
    """
    return _SmoothedNLL.apply(logits, target, smoothing)


def translation_loss(model, batch: dict, smoothing: float) -> tuple[Tensor, Tensor, Tensor]:
    """A teacher-forced batch's summed smoothed loss, summed NLL and real target-token count.

    Only real (non-pad) target positions reach the output layer and softmax. Shared by the Lightning module and
    the benchmarks, so what is timed is what trains.
    """
    from ablate.model.transformer import PAD_ID

    keep = batch["tgt_out"] != PAD_ID  # (B, T)
    logits = model(batch["src"], batch["tgt_in"], keep=keep)  # (N, V)
    loss, nll = smoothed_nll(logits, batch["tgt_out"][keep], smoothing)
    return loss, nll, keep.sum()
