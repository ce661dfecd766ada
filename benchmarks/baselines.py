"""Baseline models for the benchmarks, built to compute the very function of an ablate Transformer.

`TorchTransformer` wraps torch.nn.Transformer; `MarianBaseline` is Hugging Face's MarianMTModel built from a
MarianConfig (installed only for benchmarks: `pip install -e '.[bench]'`). Both copy an ablate model's weights, so a
benchmark can check equal logits before it times anything; they mirror only the paper's variant (post-norm,
sinusoidal positions, scaled dot-product attention, all embeddings tied, ReLU or GELU).
"""

from __future__ import annotations

import itertools
import math
import warnings

import torch
from torch import Tensor, nn

from ablate.model.positional import sinusoids
from ablate.model.tokens import BOS_ID as BOS
from ablate.model.tokens import EOS_ID as EOS
from ablate.model.tokens import PAD_ID


@torch.no_grad()
def check_same_function(ours: nn.Module, baseline: nn.Module, name: str, src: Tensor, tgt_in: Tensor) -> None:
    """With equal weights and dropout off, a baseline must give ablate's logits at real (non-pad) target positions,
    or a benchmark would time different work. Train/eval modes are left as they were."""
    modes = ours.training, baseline.training
    ours.eval(), baseline.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nn.TransformerEncoder's inference fast path warns about nested tensors
        diff = (ours(src, tgt_in) - baseline(src, tgt_in))[tgt_in != PAD_ID].abs().max()
    ours.train(modes[0]), baseline.train(modes[1])
    if diff > 1e-3:
        raise RuntimeError(
            f"the {name} baseline differs from ablate by {diff:.2e} in logits; it mirrors only the paper's variant "
            "(post-norm, sinusoidal, all embeddings tied, scaled dot-product attention)"
        )


class TorchTransformer(nn.Module):
    """nn.Transformer plus what it lacks: shared token embeddings (x sqrt(D)) tied to the output layer, sinusoids.

    nn.Transformer does three things that ablate's post-norm model (like the paper) does not; we align them so both
    time the same computation: dropout inside the FFN (removed), dropout on attention weights (set to
    model.attention_dropout, 0 by default) and a final LayerNorm after encoder and decoder (removed). Parameter
    counts then match exactly, and `copy_from` makes it compute the very function of an ablate model.
    """

    def __init__(self, cfg, vocab_size: int):
        super().__init__()
        d = cfg.d_model
        self.tokens = nn.Embedding(vocab_size, d, padding_idx=PAD_ID)
        self.register_buffer("pe", sinusoids(cfg.max_positions, d), persistent=False)
        self.scale, self.dropout = math.sqrt(d), nn.Dropout(cfg.dropout)
        self.core = nn.Transformer(
            d_model=d, nhead=cfg.heads, num_encoder_layers=cfg.enc_layers, num_decoder_layers=cfg.dec_layers,
            dim_feedforward=cfg.d_ff, dropout=cfg.dropout, activation=cfg.activation, batch_first=True,
            norm_first=False,
        )  # fmt: skip
        for layer in itertools.chain(self.core.encoder.layers, self.core.decoder.layers):
            layer.dropout = nn.Identity()  # the one between the two FFN linears
        for module in self.core.modules():
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = cfg.attention_dropout
        self.core.encoder.norm = self.core.decoder.norm = None
        self.output = nn.Linear(d, vocab_size, bias=False)
        self.output.weight = self.tokens.weight

    @torch.no_grad()
    def copy_from(self, model) -> None:
        """Take the weights of an ablate Transformer (post-norm, all embeddings tied)."""
        pairs = [(self.tokens, model.src_embed.tokens)]
        for mine, theirs in zip(self.core.encoder.layers, model.encoder):
            pairs += [(mine.self_attn, theirs.self_attn), (mine.norm1, theirs.res_attn.norm)]
            ff = theirs.ff.net
            pairs += [(mine.linear1, ff[0]), (mine.linear2, ff[2]), (mine.norm2, theirs.res_ff.norm)]
        for mine, theirs in zip(self.core.decoder.layers, model.decoder):
            pairs += [(mine.self_attn, theirs.self_attn), (mine.multihead_attn, theirs.cross_attn)]
            pairs += [(mine.norm1, theirs.res_self.norm), (mine.norm2, theirs.res_cross.norm)]
            ff = theirs.ff.net
            pairs += [(mine.linear1, ff[0]), (mine.linear2, ff[2]), (mine.norm3, theirs.res_ff.norm)]
        for dst, src in pairs:
            if isinstance(dst, nn.MultiheadAttention):  # both fuse W_q, W_k, W_v in that order
                dst.in_proj_weight.copy_(src.in_proj.weight)
                dst.in_proj_bias.copy_(src.in_proj.bias)
                dst.out_proj.load_state_dict(src.out_proj.state_dict())
            else:
                dst.load_state_dict(src.state_dict())

    def embed(self, ids: Tensor) -> Tensor:
        return self.dropout(self.tokens(ids) * self.scale + self.pe[: ids.size(1)])  # (B, L, D)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        t = tgt_in.size(1)
        src_pad, tgt_pad = src == PAD_ID, tgt_in == PAD_ID  # (B, S), (B, T); True = ignore, as nn.Transformer wants
        causal = torch.ones(t, t, dtype=torch.bool, device=src.device).triu(1)  # (T, T), True = future
        x = self.core(
            self.embed(src), self.embed(tgt_in), tgt_mask=causal, src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True,
        )  # fmt: skip
        return self.output(x)  # (B, T, V)


class MarianBaseline(nn.Module):
    """MarianMTModel with the dimensions of an ablate model config and, after `copy_from`, its weights.

    Marian is post-norm like the paper and shares source, target and output embeddings; we align what differs:
    no dropout on attention weights or inside the FFN (ablate has neither by default), ablate's interleaved
    sinusoids written over Marian's half-sin/half-cos table, a zero `final_logits_bias`. Decoding starts from
    ablate's BOS and stops at its EOS. Attention runs through torch's scaled_dot_product_attention ("sdpa").
    """

    def __init__(self, cfg, vocab_size: int):
        super().__init__()
        from transformers import MarianConfig, MarianMTModel  # the optional `bench` extra

        heads = dict(encoder_attention_heads=cfg.heads, decoder_attention_heads=cfg.heads)
        config = MarianConfig(
            vocab_size=vocab_size, decoder_vocab_size=vocab_size, d_model=cfg.d_model,
            encoder_layers=cfg.enc_layers, decoder_layers=cfg.dec_layers, **heads,
            encoder_ffn_dim=cfg.d_ff, decoder_ffn_dim=cfg.d_ff, activation_function=cfg.activation,
            dropout=cfg.dropout, attention_dropout=cfg.attention_dropout, activation_dropout=0.0,
            max_position_embeddings=cfg.max_positions, scale_embedding=cfg.embed_scale,
            pad_token_id=PAD_ID, bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=BOS,
            forced_eos_token_id=None, share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
            attn_implementation="sdpa",
        )  # fmt: skip
        self.hf = MarianMTModel(config)

    @torch.no_grad()
    def copy_from(self, model) -> None:
        """Take the weights of an ablate Transformer (post-norm, all embeddings tied, d_k = d_model / heads)."""
        hf = self.hf.model
        hf.shared.weight.copy_(model.src_embed.tokens.weight)
        pe = sinusoids(hf.encoder.embed_positions.weight.size(0), hf.encoder.embed_positions.weight.size(1))
        hf.encoder.embed_positions.weight.copy_(pe)
        hf.decoder.embed_positions.weight.copy_(pe)
        self.hf.final_logits_bias.zero_()
        for mine, theirs in zip(hf.encoder.layers, model.encoder):
            _copy_attention(mine.self_attn, theirs.self_attn)
            _copy_ffn(mine, theirs.ff)
            mine.self_attn_layer_norm.load_state_dict(theirs.res_attn.norm.state_dict())
            mine.final_layer_norm.load_state_dict(theirs.res_ff.norm.state_dict())
        for mine, theirs in zip(hf.decoder.layers, model.decoder):
            _copy_attention(mine.self_attn, theirs.self_attn)
            _copy_attention(mine.encoder_attn, theirs.cross_attn)
            _copy_ffn(mine, theirs.ff)
            mine.self_attn_layer_norm.load_state_dict(theirs.res_self.norm.state_dict())
            mine.encoder_attn_layer_norm.load_state_dict(theirs.res_cross.norm.state_dict())
            mine.final_layer_norm.load_state_dict(theirs.res_ff.norm.state_dict())

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        out = self.hf(input_ids=src, attention_mask=src != PAD_ID, decoder_input_ids=tgt_in,
                      decoder_attention_mask=tgt_in != PAD_ID, use_cache=False)  # fmt: skip
        return out.logits  # (B, T, V)

    @torch.no_grad()
    def generate(self, src: Tensor, beam: int, max_new_tokens: int, alpha: float) -> list[list[int]]:
        """Hugging Face generate(): greedy (beam 1) or beam search with its KV cache; ids without BOS/EOS."""
        beam_args = dict(length_penalty=alpha, early_stopping=True) if beam > 1 else {}
        out = self.hf.generate(
            input_ids=src, attention_mask=src != PAD_ID, num_beams=beam, do_sample=False, max_new_tokens=max_new_tokens,
            suppress_tokens=[PAD_ID, BOS], **beam_args,
        )  # fmt: skip
        hyps = []
        for row in out.tolist():
            row = row[1:]  # decoder_start_token_id
            hyps.append(row[: row.index(EOS)] if EOS in row else [t for t in row if t != PAD_ID])
        return hyps


def _copy_attention(dst: nn.Module, src: nn.Module) -> None:
    """ablate fuses W_q, W_k, W_v (in that order) into one in_proj; Marian keeps q_proj, k_proj, v_proj."""
    if src.kv_heads != src.heads or src.d_k != src.d_v:
        raise ValueError("Marian has one head size and no grouped keys/values; the ablate model must too")
    weights = src.in_proj.weight.split([src.q_dim, src.k_dim, src.v_dim])
    biases = src.in_proj.bias.split([src.q_dim, src.k_dim, src.v_dim])
    for proj, w, b in zip((dst.q_proj, dst.k_proj, dst.v_proj), weights, biases):
        proj.weight.copy_(w)
        proj.bias.copy_(b)
    dst.out_proj.load_state_dict(src.out_proj.state_dict())


def _copy_ffn(dst: nn.Module, ff: nn.Module) -> None:
    dst.fc1.load_state_dict(ff.net[0].state_dict())
    dst.fc2.load_state_dict(ff.net[2].state_dict())
