"""Positional encodings (Sec. 3.5): the paper's sinusoids, learned embeddings (Table 3 row E), none; and the
relative schemes that followed it: rotary (RoPE), ALiBi, T5 relative buckets, Shaw et al.'s relative keys.

An absolute module adds position information to a (B, T, D) embedding sequence whose first position is
`start` (non-zero during incremental decoding); it takes `d_model` and `max_positions` keyword arguments.
A relative module (`relative = True`, see `RelativePosition` below) acts inside self-attention instead.
Either kind is one `PositionalEncoding` subclass decorated with `@register(POSITIONAL, "name")`; the facts the
rest of the code needs about it are its class attributes, so nothing outside this file asks for it by name.
One with parameters also takes `members` (None, or K: a member model's, see ablate.model.members): its parameters
then carry a leading K axis and its inputs hold K*B member-major rows.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ablate.model.members import member_rows
from ablate.registry import Registry, register


class PositionalEncoding(nn.Module):
    """Base of every positional encoding: the facts the builder, config validation and decoding read."""

    relative: bool = False  # acts inside self-attention (see RelativePosition), not on the embeddings
    adds_bias: bool = False  # adds a float bias to the attention logits, which only some kernels can take
    bounded_length: bool = False  # sequences longer than model.max_positions cannot be encoded or decoded


POSITIONAL: dict[str, type[PositionalEncoding]] = Registry(PositionalEncoding)


def bias_free_positionals() -> list[str]:
    """Registered encodings that add no logit bias: the ones a kernel without bias support can use."""
    return sorted(name for name, cls in POSITIONAL.items() if not cls.adds_bias)


def sinusoids(length: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...); shape (length, d_model)."""
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model + d_model % 2, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * inv_freq)
    pe[:, 1::2] = torch.cos(pos * inv_freq)
    return pe[:, :d_model].float()


@register(POSITIONAL, "sinusoidal")
class Sinusoidal(PositionalEncoding):
    """Fixed sinusoids; the table grows on demand, so any length works (the reason the paper kept them)."""

    def __init__(self, *, d_model: int, max_positions: int):
        super().__init__()
        self.d_model = d_model
        self.register_buffer("pe", sinusoids(max_positions, d_model), persistent=False)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        end = start + x.size(1)
        if end > self.pe.size(0):
            self.pe = sinusoids(max(end, 2 * self.pe.size(0)), self.d_model).to(self.pe.device)
        return x + self.pe[start:end].to(x.dtype)


@register(POSITIONAL, "learned")
class Learned(PositionalEncoding):
    """A learned embedding per absolute position, up to max_positions (Table 3 row E)."""

    bounded_length = True

    def __init__(self, *, d_model: int, max_positions: int, members: int | None = None):
        super().__init__()
        self.members, self.max_positions = members, max_positions
        self.table = _table(members, max_positions, d_model)
        nn.init.normal_(self.table.weight, std=d_model**-0.5)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        end = start + x.size(1)
        if end > self.max_positions:
            raise ValueError(f"sequence of length {end} exceeds model.max_positions={self.max_positions} (learned positions)")
        if self.members is None:
            return x + self.table.weight[start:end].to(x.dtype)
        rows = x.unflatten(0, (self.members, -1))  # (K, B, L, D)
        return (rows + self.table.weight[:, None, start:end].to(x.dtype)).flatten(0, 1)


@register(POSITIONAL, "none")
class NoPosition(PositionalEncoding):
    """No position information: the encoder becomes a bag of words, the decoder keeps only causal order."""

    def __init__(self, *, d_model: int, max_positions: int):
        super().__init__()

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        return x


# -- relative positions: act inside self-attention instead of on the embeddings ------------------------------------
#
# A class with `relative = True` is built once per self-attention layer (cross attention has no shared position
# axis between source and target, so it gets none) and the embeddings get no absolute positions. It takes
# `heads`, `d_k`, `max_positions` and `causal` (decoder self-attention) and may implement either hook:
#   rotate(q, k, pos) -> (q, k)           applied to the new queries and keys before they enter the KV cache
#   bias(q, q_pos, k_pos, scale) -> Tensor | None   added to the scaled logits, broadcastable to (B, H, T, S)
# Positions are absolute token indices, so cached decoding sees exactly what the full forward pass sees.


def _table(members: int | None, rows: int, dim: int) -> nn.Module:
    """An nn.Embedding(rows, dim), or for K members a module holding one (K, rows, dim) weight (state-dict key `weight`
    either way)."""
    if members is None:
        return nn.Embedding(rows, dim)
    table = nn.Module()
    table.weight = nn.Parameter(torch.empty(members, rows, dim))
    return table


class RelativePosition(PositionalEncoding):
    relative = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        declared = any("adds_bias" in k.__dict__ for k in cls.__mro__ if k is not PositionalEncoding)
        if not declared and cls.bias is not RelativePosition.bias:  # its own bias(), or a mixin's: one attention calls
            cls.adds_bias = True  # left False, the bias went uncalled: no positions anywhere, and no word of it

    def __init__(self, *, heads: int, d_k: int, max_positions: int, causal: bool):
        super().__init__()
        self.heads, self.d_k, self.causal = heads, d_k, causal

    def rotate(self, q: Tensor, k: Tensor, pos: Tensor) -> tuple[Tensor, Tensor]:
        return q, k

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale) -> Tensor | None:
        return None


@register(POSITIONAL, "rotary")
class Rotary(RelativePosition):
    """RoPE (Su et al., 2021): rotate each (q, k) pair of dims by pos * theta_i, so q.k depends on positions only
    through their difference. With an odd d_k the last dim is left unrotated."""

    def __init__(self, *, heads: int, d_k: int, max_positions: int, causal: bool, base: float = 10000.0):
        super().__init__(heads=heads, d_k=d_k, max_positions=max_positions, causal=causal)
        half = d_k // 2
        self.register_buffer("inv_freq", base ** (-torch.arange(half, dtype=torch.float32) / max(half, 1)), persistent=False)

    def _rotate(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        half = self.inv_freq.numel()
        x1, x2, rest = x[..., :half], x[..., half : 2 * half], x[..., 2 * half :]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos, rest], dim=-1)

    def rotate(self, q: Tensor, k: Tensor, pos: Tensor) -> tuple[Tensor, Tensor]:
        angles = pos.float()[:, None] * self.inv_freq[None, :]  # (T, d_k // 2)
        cos, sin = angles.cos().to(q.dtype), angles.sin().to(q.dtype)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)


def alibi_slopes(heads: int) -> Tensor:
    """Press et al. (2022): a geometric sequence starting at 2^(-8/n); for non powers of two, interleave the next."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    n = 2 ** math.floor(math.log2(heads))
    slopes = power_of_two(n)
    if n < heads:
        slopes += power_of_two(2 * n)[0::2][: heads - n]
    return torch.tensor(slopes)


@register(POSITIONAL, "alibi")
class ALiBi(RelativePosition):
    """ALiBi: a fixed, per-head linear penalty -m_h * |i - j| on the logits; no parameters, extrapolates to length."""

    adds_bias = True

    def __init__(self, *, heads: int, d_k: int, max_positions: int, causal: bool):
        super().__init__(heads=heads, d_k=d_k, max_positions=max_positions, causal=causal)
        self.register_buffer("slopes", alibi_slopes(heads).view(heads, 1, 1), persistent=False)

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale) -> Tensor:
        distance = (q_pos[:, None] - k_pos[None, :]).abs().to(q.dtype)  # (T, S)
        return -self.slopes.to(q.dtype) * distance  # (H, T, S)


def t5_buckets(relative: Tensor, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128) -> Tensor:
    """Raffel et al. (2020): exact buckets for small |distance|, logarithmic ones up to max_distance, then one."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative > 0).long() * num_buckets
        n = relative.abs()
    else:
        n = (-relative).clamp(min=0)  # causal: only keys at or before the query
    exact = num_buckets // 2
    log_bucket = exact + (torch.log(n.float().clamp(min=1) / exact) / math.log(max_distance / exact) * (num_buckets - exact)).long()
    log_bucket = log_bucket.clamp(max=num_buckets - 1)
    return bucket + torch.where(n < exact, n, log_bucket)


@register(POSITIONAL, "t5_bias")
class T5Bias(RelativePosition):
    """T5's learned relative position bias: one scalar per head and distance bucket (32 buckets, max distance 128)."""

    num_buckets, max_distance = 32, 128
    adds_bias = True

    def __init__(self, *, heads: int, d_k: int, max_positions: int, causal: bool, members: int | None = None):
        super().__init__(heads=heads, d_k=d_k, max_positions=max_positions, causal=causal)
        self.members = members
        self.table = _table(members, self.num_buckets, heads)
        nn.init.normal_(self.table.weight, std=0.02)

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale) -> Tensor:
        buckets = t5_buckets(k_pos[None, :] - q_pos[:, None], not self.causal, self.num_buckets, self.max_distance)
        if self.members is None:
            return self.table(buckets).permute(2, 0, 1).to(q.dtype)  # (H, T, S)
        per_member = self.table.weight[:, buckets].permute(0, 3, 1, 2).to(q.dtype)  # (K, H, T, S)
        return member_rows(per_member, q.size(0) // self.members)  # (K*B, H, T, S)


@register(POSITIONAL, "shaw")
class ShawRelative(RelativePosition):
    """Relative position representations (Shaw et al., 2018), on the keys: e_ij += q_i . a_clip(j-i) * scale, with
    a learned a_k for k in [-16, 16] shared by heads. The authors' value term adds nothing on en-de in their
    ablation; leaving it out keeps the fused attention kernel usable."""

    max_distance = 16
    adds_bias = True

    def __init__(self, *, heads: int, d_k: int, max_positions: int, causal: bool, members: int | None = None):
        super().__init__(heads=heads, d_k=d_k, max_positions=max_positions, causal=causal)
        self.members = members
        self.table = _table(members, 2 * self.max_distance + 1, d_k)
        nn.init.normal_(self.table.weight, std=d_k**-0.5)

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale) -> Tensor:
        rel = (k_pos[None, :] - q_pos[:, None]).clamp(-self.max_distance, self.max_distance) + self.max_distance
        if self.members is None:
            a = self.table(rel).to(q.dtype)  # (T, S, Dk)
            return torch.einsum("bhtd,tsd->bhts", q, a) * scale  # (B, H, T, S)
        a = self.table.weight[:, rel].to(q.dtype)  # (K, T, S, Dk)
        b, h, t, d = q.shape  # per query: (1, Dk) @ (Dk, S), batched over (K, B, H, T); the same operations for any K
        per_member = q.view(self.members, b // self.members, h, t, 1, d) @ a.transpose(-1, -2)[:, None, None]
        return per_member.view(b, h, t, -1) * scale
