"""`build_transformer`: the only place config names become modules (a Transformer, or the member model of K)."""

from __future__ import annotations

import inspect
import re

import torch
from torch import nn

from ablate.config.schema import ModelConfig
from ablate.model.activations import ACTIVATIONS
from ablate.model.attention import ATTENTION
from ablate.model.member_loop import attach_run_model
from ablate.model.members import MemberEmbedding, MemberLinear
from ablate.model.multi_head import MultiHeadAttention
from ablate.model.positional import POSITIONAL, NoPosition
from ablate.model.scaling import SCALING
from ablate.model.tokens import PAD_ID
from ablate.model.transformer import DecoderLayer, Embedding, EncoderLayer, FeedForward, Transformer, layer_norm
from ablate.registry import lookup


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


def build_transformer(cfg: ModelConfig, vocab_size: int, members: int | None = None) -> Transformer:
    """Wire a Transformer from the `model` config section and the (shared) vocabulary size; weights this machine cannot
    allocate are a ValueError naming the sizes (the config validator refuses sizes no machine holds before this).
    `members=K` builds the member model of K such Transformers (ablate.model.members)."""
    if members is not None and members < 1:
        raise ValueError(f"members={members} must be at least 1")
    try:
        model = _wire(cfg, vocab_size, members)
        if members is not None:
            with torch.device("meta"):  # the structure only: member k's weights are swapped in for its call
                attach_run_model(model, _wire(cfg, vocab_size))
        return model
    except (MemoryError, RuntimeError) as e:
        if isinstance(e, RuntimeError) and not re.search(r"allocate|overflow", str(e)):
            raise
        raise ValueError(f"not enough memory on this machine for the model's weights ({cfg.sizes}, vocabulary {vocab_size:,})") from None


def _accepting(cls: type, members: int | None, key: str, value: str, **kwargs) -> nn.Module:
    """`cls(**kwargs)`, given `members` when its constructor takes it. A member model refuses a variant that has
    parameters but no member axis for them (a plugin written for one model), naming it."""
    if "members" in inspect.signature(cls.__init__).parameters:
        return built(cls, f"{key}={value}", **kwargs, members=members)
    return _without_members(built(cls, f"{key}={value}", **kwargs), members, f"{key}={value}", "argument")


def built(cls: type, named: str, **kwargs) -> nn.Module:
    """`cls(**kwargs)`; a constructor that does not take what the builder gives (a plugin's, say) is a ValueError
    naming the key, the class and its file, not a TypeError from inside the builder."""
    try:
        if cls.__init__ is nn.Module.__init__ and kwargs:  # its (*args, **kwargs) binds anything, then refuses them all
            raise TypeError(f"{cls.__qualname__} has no __init__ of its own, and nn.Module's takes no arguments")
        inspect.signature(cls).bind(**kwargs)
    except TypeError as e:
        raise ValueError(
            f"{named}: {cls.__qualname__} ({_file(cls)}) cannot be built with {', '.join(kwargs) or 'no arguments'} "
            f"({e}); docs/variants.md gives what each registry's classes take"
        ) from None
    return cls(**kwargs)


def _file(cls: type) -> str:
    """Where `cls` is written, to name in an error: its file, else its module."""
    try:
        return inspect.getsourcefile(cls) or cls.__module__
    except TypeError:  # a class with no Python source
        return cls.__module__


def _calls_as_a_kernel(kernel: nn.Module, named: str) -> None:
    """Every kernel is called `kernel(q, k, v, mask, scale)`: one whose forward takes other arguments is named here,
    when the model is built, not after the data has loaded."""
    try:
        inspect.signature(kernel.forward).bind("q", "k", "v", "mask", "scale")
    except TypeError as e:
        cls = type(kernel)
        raise ValueError(
            f"{named}: {cls.__qualname__}.forward ({_file(cls)}) cannot be called as forward(q, k, v, mask, scale) "
            f"({e}); docs/variants.md gives a kernel's signature"
        ) from None


class NotMemberable(ValueError):
    """A variant with parameters but no member axis for them, in a member model."""


def _without_members(module: nn.Module, members: int | None, named: str, how: str) -> nn.Module:
    """`module`, built without a member axis: refused in a member model if it has parameters or saves buffers with
    the model (a seed-dependent table, say), which every member would share or be stacked wrongly."""
    if members is not None and (saved := list(module.state_dict())):
        buffers = [name for name in saved if name not in dict(module.named_parameters())]
        what = (
            f"buffers saved with the model ({', '.join(buffers[:3])}: register_buffer(..., persistent=False) keeps one out)"
            if buffers and len(buffers) == len(saved)
            else "parameters"
        )
        raise NotMemberable(f"{named} has {what} but takes no `members` {how}, so it cannot train as members (docs/variants.md)")
    return module


def member_problem(cfg: ModelConfig, vocab_size: int) -> str | None:
    """Why `cfg`'s variants cannot train as members (one with parameters and no `members` argument, a plugin written
    for one model), found by wiring a member model on the meta device, which allocates nothing: `ablate sweep` asks
    before its first trial, rather than every group failing once its data has loaded."""
    try:
        with torch.device("meta"):
            _wire(cfg, vocab_size, members=2)
    except NotMemberable as e:
        return str(e)
    return None


def _wire(cfg: ModelConfig, vocab_size: int, members: int | None = None) -> Transformer:
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
            kwargs = {"heads": heads, "d_k": d_k, "max_positions": cfg.max_positions, "causal": causal}
            position = _accepting(positional_cls, members, "model.positional", cfg.positional, **kwargs)
        offered = {"causal": causal, "self_attention": self_attention, "window": cfg.attention_window, "members": members}
        options = {name: offered[name] for name in kernel_cls.options}
        kernel = built(kernel_cls, f"model.attention={cfg.attention}", heads=heads, d_k=d_k, dropout=cfg.attention_dropout, **options)
        _calls_as_a_kernel(kernel, f"model.attention={cfg.attention}")
        if "members" not in options:
            _without_members(kernel, members, f"model.attention={cfg.attention}", "option")
        return MultiHeadAttention(
            d_model=cfg.d_model,
            heads=heads,
            d_k=d_k,
            d_v=d_v,
            kv_heads=kv_heads,
            kernel=kernel,
            scaling=_accepting(scaling_cls, members, "model.attention_scaling", cfg.attention_scaling, heads=heads, d_k=d_k),
            position=position,
            members=members,
        )

    def ff() -> FeedForward:
        named = f"model.activation={cfg.activation}"
        activation = _without_members(built(activation_cls, named), members, named, "argument")
        return FeedForward(d_model=cfg.d_model, d_ff=cfg.d_ff, activation=activation, members=members)

    def token_table() -> nn.Module:
        if members is None:
            table = nn.Embedding(vocab_size, cfg.d_model, padding_idx=PAD_ID)
        else:
            table = MemberEmbedding(members, vocab_size, cfg.d_model)
        nn.init.normal_(table.weight, std=cfg.init_std or cfg.d_model**-0.5)
        with torch.no_grad():
            table.weight[..., PAD_ID, :].zero_()
        return table

    def embedding(tokens: nn.Module) -> Embedding:
        # A relative scheme lives in the self-attention layers; the embeddings then carry no absolute positions.
        absolute_cls = NoPosition if relative else positional_cls
        positional = _accepting(
            absolute_cls, members, "model.positional", cfg.positional, d_model=cfg.d_model, max_positions=cfg.max_positions
        )
        return Embedding(tokens=tokens, positional=positional, scale=cfg.embed_scale, dropout=cfg.dropout)

    def final_norm() -> nn.Module:
        return layer_norm(cfg.d_model, members) if pre_norm else nn.Identity()

    common = {"d_model": cfg.d_model, "dropout": cfg.dropout, "pre_norm": pre_norm, "members": members}
    tgt_tokens = token_table()
    src_tokens = tgt_tokens if cfg.tie_embeddings == "all" else token_table()
    output = (
        nn.Linear(cfg.d_model, vocab_size, bias=False) if members is None else MemberLinear(members, cfg.d_model, vocab_size, bias=False)
    )
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
