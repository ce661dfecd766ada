"""Shared test helpers: tiny model configs and batches; unit tests never build paper-sized tensors."""

from __future__ import annotations

import torch

from ablate.config import ModelConfig

VOCAB = 32


def tiny_model(**overrides) -> ModelConfig:
    base = dict(enc_layers=2, dec_layers=2, d_model=16, d_ff=32, heads=4, dropout=0.0, max_positions=64)
    base.update(overrides)
    return ModelConfig(**base)


def random_batch(b: int = 3, s: int = 7, t: int = 6, vocab: int = VOCAB, pad_tail: bool = True):
    """Token ids avoiding pad (0); with pad_tail, later rows end in padding as real batches do."""
    src = torch.randint(4, vocab, (b, s))
    tgt = torch.randint(4, vocab, (b, t))
    if pad_tail:
        for i in range(1, b):
            src[i, s - i :] = 0
            tgt[i, t - i :] = 0
    return src, tgt
