"""Positional encodings (Sec. 3.5): the paper's sinusoids, learned embeddings (Table 3 row E), none.

Each module adds position information to a (B, T, D) embedding sequence whose first position is
`start` (non-zero during incremental decoding). To add a variant, write a class taking
`d_model` and `max_positions` keyword arguments and decorate it with `@register(POSITIONAL, "name")`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ablate.registry import register

POSITIONAL: dict[str, type[nn.Module]] = {}


def sinusoids(length: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...); shape (length, d_model)."""
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model + d_model % 2, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * inv_freq)
    pe[:, 1::2] = torch.cos(pos * inv_freq)
    return pe[:, :d_model].float()


@register(POSITIONAL, "sinusoidal")
class Sinusoidal(nn.Module):
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
class Learned(nn.Module):
    """A learned embedding per absolute position, up to max_positions (Table 3 row E)."""

    def __init__(self, *, d_model: int, max_positions: int):
        super().__init__()
        self.table = nn.Embedding(max_positions, d_model)
        nn.init.normal_(self.table.weight, std=d_model**-0.5)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        end = start + x.size(1)
        if end > self.table.num_embeddings:
            raise ValueError(f"sequence of length {end} exceeds model.max_positions={self.table.num_embeddings} (learned positions)")
        return x + self.table.weight[start:end].to(x.dtype)


@register(POSITIONAL, "none")
class NoPosition(nn.Module):
    """No position information: the encoder becomes a bag of words, the decoder keeps only causal order."""

    def __init__(self, *, d_model: int, max_positions: int):
        super().__init__()

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        return x
