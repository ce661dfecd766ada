"""Label-smoothed cross entropy (Sec. 5.4) and the plain NLL for perplexity, from one log-softmax.

At an 8k-41k vocabulary the output softmax is a large share of a training step on CPU. `F.cross_entropy` with
label smoothing, plus a second call for the NLL that perplexity needs, passes over the (N, V) logits about eight
times and allocates several (N, V) temporaries; this does forward and backward in four passes, writing the
gradient into the saved log-probabilities.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ablate.model.tokens import PAD_ID


def upcast(x: Tensor) -> Tensor:
    """Half precisions to fp32 for the softmax; fp32 and fp64 as they are (an fp64 run's loss stays fp64)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _loss_terms(logp: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """Summed smoothed loss and summed NLL from log-probabilities (N, V) and targets (N,)."""
    nll = -logp.gather(1, target[:, None]).sum()
    uniform = -logp.sum() / logp.size(1)  # cross entropy against the uniform distribution, summed over rows
    return (1 - smoothing) * nll + smoothing * uniform, nll


def _logits_grad_(logp: Tensor, target: Tensor, smoothing: float) -> Tensor:
    """d loss / d logits = softmax - (1 - eps) onehot(target) - eps / V, written over `logp` and returned."""
    grad = logp.exp_()
    grad.sub_(smoothing / grad.size(1))
    grad.scatter_add_(1, target[:, None], grad.new_full((grad.size(0), 1), -(1 - smoothing)))
    return grad


class _SmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
        logp = torch.log_softmax(upcast(logits), dim=-1)  # (N, V)
        loss, nll = _loss_terms(logp, target, smoothing)
        ctx.save_for_backward(logp, target)
        ctx.smoothing, ctx.dtype, ctx.done = smoothing, logits.dtype, False
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, None, None]:
        if ctx.done:
            raise RuntimeError("smoothed_nll reuses its saved tensors for the gradient; it can be backpropagated once")
        ctx.done = True
        logp, target = ctx.saved_tensors
        return _logits_grad_(logp, target, ctx.smoothing).mul_(grad_loss).to(ctx.dtype), None, None


class _LinearSmoothedNLL(torch.autograd.Function):
    """The output layer and the smoothed loss chunk by chunk of rows, never holding all (N, V) logits.

    Each chunk's logits, log-softmax and gradient stay in cache while the gradients for the hidden states and the
    output weight are formed at once, in forward, and scaled by the incoming gradient in backward: the same
    matmuls as `smoothed_nll(hidden @ weight.T)` without the passes over an (N, V) array in main memory (on CPU,
    the output layer plus loss took ~20% less time, and the logits' memory is gone).
    """

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
        grad_hidden, grad_weight = torch.empty_like(hidden), torch.zeros_like(weight)
        loss, nll = chunked_loss_and_grads_(hidden, weight, target, smoothing, grad_hidden, grad_weight)
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, Tensor, None, None]:
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_loss, grad_weight * grad_loss, None, None


CHUNK_ELEMENTS = 1 << 20  # logits per chunk in `linear_smoothed_nll` (4 MiB of fp32): cache-sized on CPUs


def chunked_loss_and_grads_(
    hidden: Tensor, weight: Tensor, target: Tensor, smoothing: float, grad_hidden: Tensor, grad_weight: Tensor
) -> tuple[Tensor, Tensor]:
    """Summed smoothed loss and NLL of rows `hidden` (N, D) through the output layer `weight` (V, D), chunk by chunk
    of rows; writes d loss / d hidden into `grad_hidden` (N, D) and adds d loss / d weight to `grad_weight` (V, D)."""
    rows = max(128, CHUNK_ELEMENTS // weight.size(0))
    dtype = upcast(hidden[:0]).dtype
    loss, nll = hidden.new_zeros((), dtype=dtype), hidden.new_zeros((), dtype=dtype)
    for start in range(0, hidden.size(0), rows):
        h, t = hidden[start : start + rows], target[start : start + rows]
        logp = torch.log_softmax(upcast(h @ weight.T), dim=-1)  # (rows, V)
        chunk_loss, chunk_nll = _loss_terms(logp, t, smoothing)
        loss += chunk_loss
        nll += chunk_nll
        grad = _logits_grad_(logp, t, smoothing).to(hidden.dtype)
        torch.mm(grad, weight, out=grad_hidden[start : start + rows])
        grad_weight.addmm_(grad.T, h)
    return loss, nll


def chunked_loss_applies(src: Tensor) -> bool:
    """Whether training on `src` takes the chunked output layer: on CPU (cache-bound there; it forms gradients as it
    goes, so not for evaluation); on GPUs and under autocast the plain path, whose large matmul and fused softmax they
    run well. Not under torch.compile either: its loop over chunks unrolls by the batch's token count (a recompile per
    batch), and inductor fuses the plain path itself."""
    return (
        src.device.type == "cpu" and torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu") and not torch.compiler.is_compiling()
    )


def linear_smoothed_nll(hidden: Tensor, weight: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """`smoothed_nll(hidden @ weight.T, target, smoothing)` for a bias-free output layer, computed in chunks.

    Gradients reach `hidden` and `weight` (also when the weight is tied to the embeddings).
    """
    return _LinearSmoothedNLL.apply(hidden, weight, target, smoothing)


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
    keep = batch["tgt_out"] != PAD_ID  # (B, T)
    if "keep_index" in batch:  # collated batches carry the real positions: no boolean indexing, so no host sync
        select, target = batch["keep_index"], batch["target"]
    else:
        select, target = keep, batch["tgt_out"][keep]
    src = batch["src"]
    if chunked_loss_applies(src) and model.output.bias is None:
        hidden = model(src, batch["tgt_in"], keep=select, project=False)  # (N, D)
        loss, nll = linear_smoothed_nll(hidden, model.output.weight, target, smoothing)
    else:
        logits = model(src, batch["tgt_in"], keep=select)  # (N, V)
        loss, nll = smoothed_nll(logits, target, smoothing)
    return loss, nll, keep.sum()
