"""Attention kernels and multi-head attention (Sec. 3.2, Eq. 1; Fig. 2).

A kernel turns per-head queries, keys and values into per-head outputs; `MultiHeadAttention`
(ablate.model.multi_head) owns the projections, head split, grouped keys/values (kv_heads) and the KV cache. Every kernel
has the signature `forward(q, k, v, mask, scale) -> out` with

    q: (B, H, T, Dk)   k: (B, G, S, Dk)   v: (B, G, S, Dv)   G = kv_heads, H % G == 0
    mask: bool, broadcastable to (B, H, T, S), True = may attend; or a float tensor added to the
          scaled logits (-inf = may not attend; relative position biases arrive this way); or None
    scale: float, or a tensor broadcastable to (B, H, 1, 1) for per-head learned scalings (see ablate.model.scaling)

In a member model (ablate.model.members) B is K*B rows, member-major; a kernel without parameters needs nothing more.
A kernel with parameters takes `members` (None, or K: its parameters then carry a leading K axis) and declares it
in `options`; the builder refuses a member model whose kernel has parameters but does not.

To add a kernel, subclass `AttentionKernel` with that signature, declare what it supports in its class
attributes and decorate it with `@register(ATTENTION, "name")`.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ablate.model.positional import bias_free_positionals
from ablate.registry import Registry, register

# The optional construction arguments the builder can give a kernel; each kernel declares the ones it takes.
KERNEL_OPTIONS = ("causal", "self_attention", "window", "members")


class AttentionKernel(nn.Module):
    """Base of every kernel: built with `heads`, `d_k`, `dropout` and the `options` it declares.

    causal: decoder self-attention (the mask is causal too; a kernel may exploit it)
    self_attention: queries and keys share one position axis (False in cross attention)
    window: model.attention_window
    members: None, or K for a member model (see the module docstring)
    """

    takes_bias: bool = True  # can add a float mask (the logit biases of some positional encodings)
    takes_dropout: bool = True  # drops attention weights at `dropout` (model.attention_dropout); False: it has none
    options: tuple[str, ...] = ()  # the entries of KERNEL_OPTIONS its constructor accepts

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "options" not in cls.__dict__:  # inherited: keep only the options this class's own constructor takes
            accepted = inspect.signature(cls.__init__).parameters
            cls.options = tuple(o for o in cls.options if o in accepted)
        unknown = set(cls.options) - set(KERNEL_OPTIONS)
        assert not unknown, f"{cls.__name__}.options has {sorted(unknown)}; the builder offers only {KERNEL_OPTIONS}"


ATTENTION: dict[str, type[AttentionKernel]] = Registry(AttentionKernel)


def repeat_kv(x: Tensor, heads: int) -> Tensor:
    """(B, G, S, D) -> (B, H, S, D): each key/value head serves H // G query heads."""
    groups = x.size(1)
    return x if groups == heads else x.repeat_interleave(heads // groups, dim=1)


def softmax_attend(scores: Tensor, v: Tensor, mask: Tensor | None, dropout: float, training: bool) -> Tensor:
    """The unfused tail shared by kernels that compute their own logits."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = torch.softmax(scores, dim=-1)  # (B, H, T, S)
    weights = F.dropout(weights, dropout, training)
    return weights @ repeat_kv(v, scores.size(1))  # (B, H, T, Dv)


# -- kernels ---------------------------------------------------------------------------------


@register(ATTENTION, "scaled_dot_product")
class ScaledDotProduct(AttentionKernel):
    """softmax(Q K^T * scale) V, the paper's Eq. 1, through torch's fused scaled_dot_product_attention.

    A per-head (learned) scale is folded into Q, which keeps the fused kernel usable for it too. In the decoder's
    full (teacher-forced) pass the boolean mask is causal plus the targets' padding, which only follows their real
    tokens: under causality a real query never reaches a padded key, so `is_causal` alone gives the same output at
    every real position (padded queries, which no loss or later position reads, differ) and, needing no mask
    tensor, lets SDPA run FlashAttention. A float mask (position biases) is always applied as given.
    """

    options = ("causal",)

    def __init__(self, *, heads: int, d_k: int, dropout: float = 0.0, causal: bool = False):
        super().__init__()
        self.dropout, self.causal_fast_path = dropout, causal
        # Process-wide, once a model uses this kernel: SDPA without cuDNN's backend (a later sdpa_kernel context still
        # chooses as it says). cuDNN builds an execution graph for each new input shape: on an H200 (torch 2.11,
        # 2026-11-28, benchmarks/profile_step.py) 20 ms of host time per forward call and 24 ms per backward, 84% of a
        # quickstart step whose GPU work was 1.5 ms. Token-bucket batches and beam search's growing prefixes bring new
        # shapes all run long, so the graphs never amortise; FlashAttention and the memory-efficient kernel need no
        # per-shape setup. A flag rather than a context around each call: torch.compile needs no guard on it.
        torch.backends.cuda.enable_cudnn_sdp(False)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float | Tensor) -> Tensor:
        if isinstance(scale, Tensor):
            q, scale = q * scale, 1.0
        causal = False
        if self.causal_fast_path and mask is not None and mask.dtype == torch.bool and q.size(2) == k.size(2):
            causal = True  # a branch, not a bool(): torch.compile then guards on the lengths and passes a constant
        return F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=None if causal else mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=causal,
            scale=scale,
            enable_gqa=k.size(1) != q.size(1),
        )  # (B, H, T, Dv)


@register(ATTENTION, "additive")
class Additive(AttentionKernel):
    """Additive (Bahdanau) attention: score(q, k) = w_h . tanh(q + k), the paper's comparison in Sec. 3.2.1.

    Q and K already are per-head linear maps of the inputs (W_q x, W_k y), so this is
    w^T tanh(W_q x + W_k y) with the hidden size d_k. Memory grows as B*H*T*S*d_k.
    """

    options = ("members",)

    def __init__(self, *, heads: int, d_k: int, dropout: float = 0.0, members: int | None = None):
        super().__init__()
        self.dropout, self.members = dropout, members
        self.w = nn.Parameter(torch.randn(*(() if members is None else (members,)), heads, d_k) * d_k**-0.5)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float | Tensor) -> Tensor:
        k = repeat_kv(k, q.size(1))
        hidden = torch.tanh(q.unsqueeze(3) + k.unsqueeze(2))  # (B, H, T, S, Dk)
        if self.members is None:
            scores = torch.einsum("bhtsd,hd->bhts", hidden, self.w)
        else:  # each member's rows with its own w: (K, B, H, T*S, Dk) @ (K, 1, H, Dk, 1), the same operations for any K
            b, h, t, s, d = hidden.shape
            # reshape: with fewer key/value heads, repeat_kv's k is contiguous and q is not, so the sum's T and S
            # do not merge without a copy
            per_member = hidden.reshape(self.members, b // self.members, h, t * s, d)
            scores = (per_member @ self.w.view(self.members, 1, h, d, 1)).view(b, h, t, s)
        return softmax_attend(scores * scale, v, mask, self.dropout, self.training)  # (B, H, T, S) scores


def _query_positions(t: int, s: int, device) -> Tensor:
    """Self-attention queries are the last T of the S key positions (T == S in a full pass, 1 per cached step)."""
    return torch.arange(s - t, s, device=device)


@register(ATTENTION, "local")
class Local(ScaledDotProduct):
    """Windowed self-attention: each query sees keys within `model.attention_window` positions (only earlier
    ones in the decoder), as in local/sliding-window Transformers. Cross attention stays full: source and target
    share no position axis. Implemented as a banded mask on the fused kernel, so it changes what is attended,
    not the cost; the cost curve of a truly sparse kernel would fall with the window."""

    options = ("causal", "self_attention", "window")

    def __init__(self, *, heads: int, d_k: int, dropout: float = 0.0, window: int = 16, causal: bool = False, self_attention: bool = False):
        super().__init__(heads=heads, d_k=d_k, dropout=dropout)
        self.window, self.causal, self.self_attention = window, causal, self_attention

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float | Tensor) -> Tensor:
        if self.self_attention:
            q_pos, k_pos = _query_positions(q.size(2), k.size(2), q.device), torch.arange(k.size(2), device=q.device)
            offset = q_pos[:, None] - k_pos[None, :]  # (T, S): how far back each key is
            band = (offset <= self.window) & (offset >= (0 if self.causal else -self.window))
            if mask is None:
                mask = band
            elif mask.dtype == torch.bool:
                mask = mask & band
            else:
                mask = mask.masked_fill(~band, float("-inf"))
        return super().forward(q, k, v, mask, scale)


@register(ATTENTION, "linear")
class Linear(AttentionKernel):
    """Linear attention (Katharopoulos et al., 2020): softmax(q k^T) replaced by phi(q) phi(k)^T with
    phi = elu + 1, so attention is phi(q) (phi(k)^T V) / (phi(q) . sum phi(k)): linear in sequence length.
    The decoder uses running sums over positions (causal). The logit scale multiplies q before phi. It cannot
    add position biases (alibi, t5_bias, shaw); absolute positions and rotary work."""

    takes_bias = False
    takes_dropout = False  # no attention matrix to drop from: model.attention_dropout > 0 is refused
    options = ("causal",)

    def __init__(self, *, heads: int, d_k: int, dropout: float = 0.0, causal: bool = False, eps: float = 1e-6):
        super().__init__()
        self.causal, self.eps = causal, eps

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float | Tensor) -> Tensor:
        if mask is not None and mask.dtype != torch.bool:
            raise ValueError(f"linear attention cannot add position biases; use a model.positional without them: {bias_free_positionals()}")
        heads = q.size(1)
        q, k, v = F.elu(q * scale) + 1, F.elu(repeat_kv(k, heads)) + 1, repeat_kv(v, heads)
        if self.causal:
            # Padding in a target only follows its real tokens, so causality alone keeps real positions exact.
            kv = torch.einsum("bhsd,bhse->bhsde", k, v).cumsum(dim=2)  # (B, H, S, Dk, Dv): sums up to each position
            z = k.cumsum(dim=2)  # (B, H, S, Dk)
            rows = _query_positions(q.size(2), k.size(2), q.device)
            num = torch.einsum("bhtd,bhtde->bhte", q, kv[:, :, rows])
            den = torch.einsum("bhtd,bhtd->bht", q, z[:, :, rows])
        else:
            if mask is not None:  # key padding: (B, 1, 1 or T, S) -> drop padded keys from both sums
                k = k * mask[:, :, -1:, :].transpose(-1, -2).to(k.dtype)
            kv = torch.einsum("bhsd,bhse->bhde", k, v)  # (B, H, Dk, Dv)
            num = torch.einsum("bhtd,bhde->bhte", q, kv)
            den = torch.einsum("bhtd,bhd->bht", q, k.sum(dim=2))
        return num / (den.unsqueeze(-1) + self.eps)  # (B, H, T, Dv)
