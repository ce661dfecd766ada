"""The encoder-decoder Transformer (Sec. 3, Fig. 1); ablate.model.build wires it from a config.

Shapes: B batch, S source length, T target length, D d_model, H heads, G kv_heads, V vocabulary.
Padding is ablate.model.tokens.PAD_ID. Masks are bool, True = may attend.
A member model (`members=K`, ablate.model.members) has the same structure with a leading K axis on every parameter
and K*B member-major rows in every batch.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import Tensor, nn

from ablate.model.dropout import Dropout
from ablate.model.members import MemberEmbedding, MemberLayerNorm, MemberLinear
from ablate.model.multi_head import MultiHeadAttention
from ablate.model.tokens import PAD_ID

Cache = list[dict]  # one {"self": {...}, "cross": {...}} per decoder layer


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2 (Sec. 3.3)."""

    def __init__(self, *, d_model: int, d_ff: int, activation: nn.Module, members: int | None = None):
        super().__init__()
        linear = nn.Linear if members is None else partial(MemberLinear, members)
        self.net = nn.Sequential(linear(d_model, d_ff), activation, linear(d_ff, d_model))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class Residual(nn.Module):
    """Post-norm LayerNorm(x + Dropout(f(x))) as in the paper, or pre-norm x + Dropout(f(LayerNorm(x)))."""

    def __init__(self, *, d_model: int, dropout: float, pre_norm: bool, members: int | None = None):
        super().__init__()
        self.norm, self.dropout, self.pre_norm = layer_norm(d_model, members), Dropout(dropout), pre_norm

    def forward(self, x: Tensor, sublayer, *args, **kwargs) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x), *args, **kwargs))
        return self.norm(x + self.dropout(sublayer(x, *args, **kwargs)))


class EncoderLayer(nn.Module):
    def __init__(
        self, *, self_attn: MultiHeadAttention, ff: FeedForward, d_model: int, dropout: float, pre_norm: bool, members: int | None = None
    ):
        super().__init__()
        self.self_attn, self.ff = self_attn, ff
        self.res_attn = Residual(d_model=d_model, dropout=dropout, pre_norm=pre_norm, members=members)
        self.res_ff = Residual(d_model=d_model, dropout=dropout, pre_norm=pre_norm, members=members)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.res_attn(x, self.self_attn, mask=mask)
        return self.res_ff(x, self.ff)


class DecoderLayer(nn.Module):
    def __init__(
        self,
        *,
        self_attn: MultiHeadAttention,
        cross_attn: MultiHeadAttention,
        ff: FeedForward,
        d_model: int,
        dropout: float,
        pre_norm: bool,
        members: int | None = None,
    ):
        super().__init__()
        self.self_attn, self.cross_attn, self.ff = self_attn, cross_attn, ff
        residual = partial(Residual, d_model=d_model, dropout=dropout, pre_norm=pre_norm, members=members)
        self.res_self, self.res_cross, self.res_ff = residual(), residual(), residual()

    def forward(
        self, x: Tensor, memory: Tensor, self_mask: Tensor | None, cross_mask: Tensor, cache: dict | None, start: int = 0
    ) -> Tensor:
        x = self.res_self(x, self.self_attn, mask=self_mask, cache=None if cache is None else cache["self"], start=start)
        x = self.res_cross(x, self.cross_attn, memory, mask=cross_mask, cache=None if cache is None else cache["cross"])
        return self.res_ff(x, self.ff)


def layer_norm(d_model: int, members: int | None) -> nn.Module:
    return nn.LayerNorm(d_model) if members is None else MemberLayerNorm(members, d_model)


def key_mask(ids: Tensor) -> Tensor:
    """(B, L) ids -> (B, L) bool, True at real tokens; the first position always counts as one. Every real sequence
    starts with a real token (a source with its first token or EOS, a target with BOS), so real rows are unchanged,
    while a row of padding only (a member's batch padded to the group's shape) attends to its first position instead
    of nothing: a fully masked softmax is NaN in several kernels, and its NaN would reach every weight's gradient
    through the zero gradient it gets (0 * NaN), though no loss reads that row."""
    mask = ids != PAD_ID
    mask[:, 0] = True
    return mask


class Embedding(nn.Module):
    """Token embedding, optionally multiplied by sqrt(d_model) (Sec. 3.4), plus positions and dropout."""

    def __init__(self, *, tokens: nn.Embedding | MemberEmbedding, positional: nn.Module, scale: bool, dropout: float):
        super().__init__()
        self.tokens, self.positional, self.dropout = tokens, positional, Dropout(dropout)
        self.scale = math.sqrt(tokens.embedding_dim) if scale else 1.0

    def forward(self, ids: Tensor, start: int = 0) -> Tensor:
        return self.dropout(self.positional(self.tokens(ids) * self.scale, start))  # (B, L, D)


class Transformer(nn.Module):
    """Encoder-decoder with a KV cache for step-by-step decoding.

    `forward(src, tgt_in)` is teacher-forced training; `encode` + `decode(..., cache, start)`
    is incremental decoding, which must give the same logits as the full forward pass.
    """

    def __init__(
        self,
        *,
        src_embed: Embedding,
        tgt_embed: Embedding,
        encoder: nn.ModuleList,
        decoder: nn.ModuleList,
        enc_norm: nn.Module,
        dec_norm: nn.Module,
        output: nn.Linear,
    ):
        super().__init__()
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.encoder, self.decoder = encoder, decoder
        self.enc_norm, self.dec_norm = enc_norm, dec_norm
        self.output = output

    @property
    def vocab_size(self) -> int:
        return self.output.out_features

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src: (B, S) token ids -> memory (B, S, D) and the source key mask (B, 1, 1, S)."""
        src_mask = key_mask(src)[:, None, None, :]  # (B, 1, 1, S)
        x = self.src_embed(src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.enc_norm(x), src_mask

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: Cache | None = None,
        start: int = 0,
        keep: Tensor | None = None,
        project: bool = True,
    ) -> Tensor:
        """tgt_in: (B, T) ids from position `start` on -> logits (B, T, V), or (N, V) at the N positions where
        `keep` (B, T) is True (or at the flat indices `keep` (N,) into B*T; in a member model (K, M) indices give
        (K, M, V)): training scores real targets only, so padding skips the output layer and softmax.
        With `project=False`, the final hidden states (D wide) instead of logits, for a loss that applies the
        output layer itself (ablate.model.loss.linear_smoothed_nll).

        With a cache, the T new positions attend to every cached earlier one (no padding is
        allowed inside a cached target); without, a causal mask plus target padding is used.
        """
        t = tgt_in.size(1)
        if cache is None:
            causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).tril()  # (T, T)
            self_mask = causal & key_mask(tgt_in)[:, None, None, :]  # (B, 1, T, T)
        else:
            past = start
            self_mask = None if t == 1 else torch.ones(t, past + t, dtype=torch.bool, device=tgt_in.device).tril(past)
        x = self.tgt_embed(tgt_in, start)
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, self_mask, src_mask, None if cache is None else cache[i], start)
        x = self.dec_norm(x)
        if keep is not None:  # a (B, T) mask, or the (N,) flat indices of its True positions (no host sync)
            x = x[keep] if keep.dtype == torch.bool else x.flatten(0, 1).index_select(0, keep.flatten()).view(*keep.shape, -1)
        return self.output(x) if project else x  # (B, T, V) or (N, V); D instead of V without projection

    def forward(self, src: Tensor, tgt_in: Tensor, keep: Tensor | None = None, project: bool = True) -> Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask, keep=keep, project=project)

    def new_cache(self) -> Cache:
        return [{"self": {}, "cross": {}} for _ in self.decoder]


def reorder_cache(cache: Cache, index: Tensor) -> Cache:
    """Select batch rows of every cached tensor (beam search keeps the surviving hypotheses)."""
    for layer in cache:
        for part in layer.values():
            for key, value in part.items():
                part[key] = value.index_select(0, index)
    return cache
