"""The encoder-decoder Transformer (Sec. 3, Fig. 1) and `build_transformer`, the only place config names become modules.

Shapes: B batch, S source length, T target length, D d_model, H heads, G kv_heads, V vocabulary.
Padding is ablate.model.tokens.PAD_ID. Masks are bool, True = may attend.
"""

from __future__ import annotations

import math
import re

import torch
from torch import Tensor, nn

from ablate.config.schema import SIZE_KEYS, ModelConfig
from ablate.model.attention import ATTENTION, MultiHeadAttention
from ablate.model.dropout import Dropout
from ablate.model.positional import POSITIONAL, NoPosition
from ablate.model.scaling import SCALING
from ablate.model.tokens import PAD_ID
from ablate.registry import lookup

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}
Cache = list[dict]  # one {"self": {...}, "cross": {...}} per decoder layer


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2 (Sec. 3.3)."""

    def __init__(self, *, d_model: int, d_ff: int, activation: nn.Module):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), activation, nn.Linear(d_ff, d_model))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class Residual(nn.Module):
    """Post-norm LayerNorm(x + Dropout(f(x))) as in the paper, or pre-norm x + Dropout(f(LayerNorm(x)))."""

    def __init__(self, *, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm, self.dropout, self.pre_norm = nn.LayerNorm(d_model), Dropout(dropout), pre_norm

    def forward(self, x: Tensor, sublayer, *args, **kwargs) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x), *args, **kwargs))
        return self.norm(x + self.dropout(sublayer(x, *args, **kwargs)))


class EncoderLayer(nn.Module):
    def __init__(self, *, self_attn: MultiHeadAttention, ff: FeedForward, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.self_attn, self.ff = self_attn, ff
        self.res_attn = Residual(d_model=d_model, dropout=dropout, pre_norm=pre_norm)
        self.res_ff = Residual(d_model=d_model, dropout=dropout, pre_norm=pre_norm)

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
    ):
        super().__init__()
        self.self_attn, self.cross_attn, self.ff = self_attn, cross_attn, ff
        self.res_self, self.res_cross, self.res_ff = (Residual(d_model=d_model, dropout=dropout, pre_norm=pre_norm) for _ in range(3))

    def forward(
        self, x: Tensor, memory: Tensor, self_mask: Tensor | None, cross_mask: Tensor, cache: dict | None, start: int = 0
    ) -> Tensor:
        x = self.res_self(x, self.self_attn, mask=self_mask, cache=None if cache is None else cache["self"], start=start)
        x = self.res_cross(x, self.cross_attn, memory, mask=cross_mask, cache=None if cache is None else cache["cross"])
        return self.res_ff(x, self.ff)


class Embedding(nn.Module):
    """Token embedding, optionally multiplied by sqrt(d_model) (Sec. 3.4), plus positions and dropout."""

    def __init__(self, *, tokens: nn.Embedding, positional: nn.Module, scale: bool, dropout: float):
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
        src_mask = (src != PAD_ID)[:, None, None, :]  # (B, 1, 1, S)
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
        `keep` (B, T) is True (or at the flat indices `keep` (N,) into B*T): training scores real targets only, so padding
        skips the output layer and softmax.
        With `project=False`, the final hidden states (D wide) instead of logits, for a loss that applies the
        output layer itself (ablate.model.loss.linear_smoothed_nll).

        With a cache, the T new positions attend to every cached earlier one (no padding is
        allowed inside a cached target); without, a causal mask plus target padding is used.
        """
        t = tgt_in.size(1)
        if cache is None:
            causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).tril()  # (T, T)
            self_mask = causal & (tgt_in != PAD_ID)[:, None, None, :]  # (B, 1, T, T)
        else:
            past = start
            self_mask = None if t == 1 else torch.ones(t, past + t, dtype=torch.bool, device=tgt_in.device).tril(past)
        x = self.tgt_embed(tgt_in, start)
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, self_mask, src_mask, None if cache is None else cache[i], start)
        x = self.dec_norm(x)
        if keep is not None:  # a (B, T) mask, or the (N,) flat indices of its True positions (no host sync)
            x = x[keep] if keep.dtype == torch.bool else x.flatten(0, 1).index_select(0, keep)
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


def count_parameters(model: Transformer) -> dict[str, int]:
    """Unique parameters (tied weights counted once): total, embeddings (tokens, output, positions), encoder, decoder."""
    seen: set[int] = set()

    def unique(module: nn.Module) -> int:
        n = 0
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
        return n

    counts = {
        "embeddings": unique(model.src_embed) + unique(model.tgt_embed) + unique(model.output),
        "encoder": unique(model.encoder) + unique(model.enc_norm),
        "decoder": unique(model.decoder) + unique(model.dec_norm),
    }
    counts["total"] = counts["embeddings"] + counts["encoder"] + counts["decoder"]
    assert counts["total"] == sum(p.numel() for p in model.parameters()), "a parameter belongs to no part"
    return counts


def build_transformer(cfg: ModelConfig, vocab_size: int) -> Transformer:
    """Wire a Transformer from the `model` config section and the (shared) vocabulary size; weights this machine cannot
    allocate are a ValueError naming the sizes (the config validator refuses sizes no machine holds before this)."""
    try:
        return _wire(cfg, vocab_size)
    except (MemoryError, RuntimeError) as e:
        if isinstance(e, RuntimeError) and not re.search(r"allocate|overflow", str(e)):
            raise
        sizes = ", ".join(f"model.{k}={getattr(cfg, k)}" for k in SIZE_KEYS if getattr(cfg, k) is not None)
        raise ValueError(f"not enough memory on this machine for the model's weights ({sizes}, vocabulary {vocab_size:,})") from None


def _wire(cfg: ModelConfig, vocab_size: int) -> Transformer:
    heads = cfg.heads
    d_k, d_v = cfg.head_dims
    kv_heads = cfg.kv_heads or heads
    kernel_cls = lookup(ATTENTION, cfg.attention, "model.attention")
    scaling_cls = lookup(SCALING, cfg.attention_scaling, "model.attention_scaling")
    positional_cls = lookup(POSITIONAL, cfg.positional, "model.positional")
    activation_cls = lookup(ACTIVATIONS, cfg.activation, "model.activation")
    pre_norm = cfg.norm == "pre"

    relative = positional_cls.relative

    def attention(self_attention: bool = False, causal: bool = False) -> MultiHeadAttention:
        position = None
        if relative and self_attention:
            position = positional_cls(heads=heads, d_k=d_k, max_positions=cfg.max_positions, causal=causal)
        offered = {"causal": causal, "self_attention": self_attention, "window": cfg.attention_window}
        options = {name: offered[name] for name in kernel_cls.options}
        return MultiHeadAttention(
            d_model=cfg.d_model,
            heads=heads,
            d_k=d_k,
            d_v=d_v,
            kv_heads=kv_heads,
            kernel=kernel_cls(heads=heads, d_k=d_k, dropout=cfg.attention_dropout, **options),
            scaling=scaling_cls(heads=heads, d_k=d_k),
            position=position,
        )

    def ff() -> FeedForward:
        return FeedForward(d_model=cfg.d_model, d_ff=cfg.d_ff, activation=activation_cls())

    def token_table() -> nn.Embedding:
        table = nn.Embedding(vocab_size, cfg.d_model, padding_idx=PAD_ID)
        nn.init.normal_(table.weight, std=cfg.init_std or cfg.d_model**-0.5)
        with torch.no_grad():
            table.weight[PAD_ID].zero_()
        return table

    def embedding(tokens: nn.Embedding) -> Embedding:
        # A relative scheme lives in the self-attention layers; the embeddings then carry no absolute positions.
        absolute_cls = NoPosition if relative else positional_cls
        positional = absolute_cls(d_model=cfg.d_model, max_positions=cfg.max_positions)
        return Embedding(tokens=tokens, positional=positional, scale=cfg.embed_scale, dropout=cfg.dropout)

    def final_norm() -> nn.Module:
        return nn.LayerNorm(cfg.d_model) if pre_norm else nn.Identity()

    common = {"d_model": cfg.d_model, "dropout": cfg.dropout, "pre_norm": pre_norm}
    tgt_tokens = token_table()
    src_tokens = tgt_tokens if cfg.tie_embeddings == "all" else token_table()
    output = nn.Linear(cfg.d_model, vocab_size, bias=False)
    if cfg.tie_embeddings in ("all", "decoder"):
        output.weight = tgt_tokens.weight
    else:
        nn.init.normal_(output.weight, std=cfg.d_model**-0.5)
    return Transformer(
        src_embed=embedding(src_tokens),
        tgt_embed=embedding(tgt_tokens),
        encoder=nn.ModuleList(EncoderLayer(self_attn=attention(True), ff=ff(), **common) for _ in range(cfg.enc_layers)),
        decoder=nn.ModuleList(
            DecoderLayer(self_attn=attention(True, causal=True), cross_attn=attention(), ff=ff(), **common) for _ in range(cfg.dec_layers)
        ),
        enc_norm=final_norm(),
        dec_norm=final_norm(),
        output=output,
    )
