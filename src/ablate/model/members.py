"""The member axis: K models of one architecture as one module whose parameters carry a leading dimension K.

Activations stay in the single model's layout with the members folded into the batch, member-major: a (K*B, T, D)
tensor holds member 0's B rows, then member 1's. A layer with per-member weights views its input as (K, B*T, D) and
runs one batched matmul (`MemberLinear`), one normalisation (`MemberLayerNorm`) or one lookup into the stacked tables
(`MemberEmbedding`); everything without weights (attention kernels, masks, residuals) sees an ordinary batch of K*B
rows, so one fused attention call serves all members, forward and backward, and a step dispatches the same operations
for K = 8 as for K = 1. That is the accelerators' path; a CPU steps member by member (ablate.model.member_loop).

A member model is built by `build_transformer(cfg, vocab, members=K)` with any initial weights; training loads the
weights of K ordinary models into it (`stack_state_dicts`), each built under its member's seed, so member k starts
exactly where its own run would, and `member_state_dict` takes member k out again in the ordinary checkpoint format.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def member_rows(t: Tensor, rows: int) -> Tensor:
    """(K, ...) -> (K*rows, ...): each member's value repeated for its rows of the folded batch (always a copy, so
    the operations do not depend on K)."""
    return t.unsqueeze(1).expand(t.size(0), rows, *t.shape[1:]).clone(memory_format=torch.contiguous_format).flatten(0, 1)


class MemberLinear(nn.Module):
    """K linear layers: weight (K, out, in), bias (K, out); x (K*B, ..., in) member-major -> (K*B, ..., out)."""

    def __init__(self, members: int, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        self.members, self.in_features, self.out_features = members, in_features, out_features
        self.weight = nn.Parameter(torch.empty(members, out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(members, out_features)) if bias else None
        bound = 1 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound)

    def forward(self, x: Tensor, rows: slice | None = None) -> Tensor:
        """With `rows`, only those output features (a fused projection's Q or K/V block)."""
        w, b = self.weight, self.bias
        if rows is not None:
            w, b = w[:, rows], None if b is None else b[:, rows]
        flat = x.reshape(self.members, -1, x.size(-1))  # (K, B*T, in)
        y = torch.bmm(flat, w.transpose(1, 2)) if b is None else torch.baddbmm(b.unsqueeze(1), flat, w.transpose(1, 2))
        return y.view(*x.shape[:-1], w.size(1))

    def extra_repr(self) -> str:
        return f"members={self.members}, in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _MemberLayerNorm(torch.autograd.Function):
    """Normalise, then each member's affine, with a backward of two passes where autograd's took four.

    Autograd's backward of `addcmul(bias, normed, weight)` multiplied the (K*B*T, D) gradient four times (each product
    and again by addcmul's `value`), and a LayerNorm without weights takes torch's slower CPU kernel: at 8 members of
    table3-small's shapes a LayerNorm took 3 to 7 ms, forward and backward, against 1.1 ms for the 8 runs' LayerNorms,
    and 2.5 ms this way (bitwise the same values and gradients).
    """

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor, unit: Tensor, eps: float) -> Tensor:
        k, d = weight.shape
        normed, mean, rstd = torch.native_layer_norm(x, (d,), unit, None, eps)  # with a (unit) weight: the fast kernel
        ctx.save_for_backward(x, normed, mean, rstd, weight)
        return torch.addcmul(bias[:, None], normed.view(k, -1, d), weight[:, None]).view(x.shape)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, Tensor, None, None]:
        x, normed, mean, rstd, weight = ctx.saved_tensors
        k, d = weight.shape
        g = grad.reshape(k, -1, d)
        grad_weight, grad_bias = (g * normed.view(k, -1, d)).sum(1), g.sum(1)
        grad_normed = (g * weight[:, None]).view(x.shape)
        grad_x = torch.ops.aten.native_layer_norm_backward(grad_normed, x, (d,), mean, rstd, None, None, [True, False, False])[0]
        return grad_x, grad_weight, grad_bias, None, None


class MemberLayerNorm(nn.Module):
    """K LayerNorms over the last dimension: weight and bias (K, D)."""

    def __init__(self, members: int, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.members, self.eps = members, eps
        self.weight = nn.Parameter(torch.ones(members, d_model))
        self.bias = nn.Parameter(torch.zeros(members, d_model))
        self.register_buffer("unit", torch.ones(d_model), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        if torch.is_autocast_enabled(x.device.type):  # in float32, as CUDA's autocast runs F.layer_norm (CPU's keeps bf16)
            with torch.autocast(x.device.type, enabled=False):
                return _MemberLayerNorm.apply(x.float(), self.weight, self.bias, self.unit.float(), self.eps)
        return _MemberLayerNorm.apply(x, self.weight, self.bias, self.unit, self.eps)


class MemberEmbedding(nn.Module):
    """K token tables, weight (K, V, D); ids (K*B, L) member-major -> (K*B, L, D).

    No `padding_idx`: a padded position's embedding never receives a gradient anyway, as no real position attends to
    a padded key and no loss reads a padded query, so member k's table trains exactly as its own nn.Embedding does.
    """

    def __init__(self, members: int, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.members, self.num_embeddings, self.embedding_dim = members, num_embeddings, embedding_dim
        self.weight = nn.Parameter(torch.randn(members, num_embeddings, embedding_dim))
        self.register_buffer("offsets", torch.arange(members) * num_embeddings, persistent=False)

    def forward(self, ids: Tensor) -> Tensor:
        flat = ids.reshape(self.members, -1) + self.offsets[:, None]  # (K, B*L): rows of the stacked (K*V, D) table
        return F.embedding(flat, self.weight.view(-1, self.embedding_dim)).view(*ids.shape, self.embedding_dim)


def project(layer: nn.Module, x: Tensor, rows: slice) -> Tensor:
    """`layer` applied with only the output features `rows`, for an ordinary nn.Linear or a MemberLinear."""
    if isinstance(layer, MemberLinear):
        return layer(x, rows)
    return F.linear(x, layer.weight[rows], None if layer.bias is None else layer.bias[rows])


def stack_state_dicts(states: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
    """K ordinary state dicts of one architecture -> the member model's (each tensor gains a leading K axis)."""
    keys = list(states[0])
    for k, state in enumerate(states[1:], 1):
        if list(state) != keys:
            raise ValueError(f"member {k} has other weights than member 0: {sorted(set(state) ^ set(keys))[:3]}")
    return {key: torch.stack([state[key] for state in states]) for key in keys}


def member_state_dict(state: dict[str, Tensor], k: int) -> dict[str, Tensor]:
    """Member k's weights from the member model's state dict, as its own ordinary model saves them."""
    return {key: value[k].clone() for key, value in state.items()}
