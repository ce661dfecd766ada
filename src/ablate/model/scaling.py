"""Scalings of the attention logits (Sec. 3.2.1, footnote 4): the 1/sqrt(d_k) of Eq. 1 and its alternatives.

A scaling produces the factor that multiplies the logits of any attention kernel, so `model.attention_scaling`
ablates Eq. 1's 1/sqrt(d_k) for every kernel alike: a float, or a (H, 1, 1) tensor for per-head learned scales
((K, H, 1, 1) in a member model: a scaling with parameters takes `members`, see ablate.model.members).
It may also normalise every new query and key before anything else (QK-norm). To add one, subclass `Scaling`
and decorate it with `@register(SCALING, "name")`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ablate.registry import Registry, register


class Scaling(nn.Module):
    """Base of every scaling: built with `heads` and `d_k`; `forward()` returns the factor."""

    def normalize(self, x: Tensor) -> Tensor:
        """Applied to every new query and key (B, H, L, Dk) before positions and the cache; the identity by default."""
        return x


SCALING: dict[str, type[Scaling]] = Registry(Scaling)


def _shape(members: int | None, *shape: int) -> tuple[int, ...]:
    return shape if members is None else (members, *shape)


class _FixedScale(Scaling):
    def __init__(self, *, heads: int, d_k: int):
        super().__init__()
        self.value = self.factor(d_k)

    def forward(self) -> float:
        return self.value

    def extra_repr(self) -> str:
        return f"scale={self.value:.4g}"


@register(SCALING, "inv_sqrt_dk")
class InvSqrtDk(_FixedScale):
    """1/sqrt(d_k): keeps dot products of unit-variance q, k at unit variance (Sec. 3.2.1, footnote 4)."""

    factor = staticmethod(lambda d_k: d_k**-0.5)


@register(SCALING, "inv_dk")
class InvDk(_FixedScale):
    """1/d_k (as in muP): logits stay O(1) when q and k become correlated during training."""

    factor = staticmethod(lambda d_k: 1.0 / d_k)


@register(SCALING, "none")
class NoScale(_FixedScale):
    """Unscaled logits; with large d_k the softmax saturates, which is what the paper's scaling avoids."""

    factor = staticmethod(lambda d_k: 1.0)


@register(SCALING, "learned")
class LearnedTemperature(Scaling):
    """A learned inverse temperature per head, initialised at 1/sqrt(d_k), kept positive via exp."""

    def __init__(self, *, heads: int, d_k: int, members: int | None = None):
        super().__init__()
        self.log_scale = nn.Parameter(torch.full(_shape(members, heads), -0.5 * math.log(d_k)))

    def forward(self) -> Tensor:
        return self.log_scale.exp()[..., None, None]  # (H, 1, 1), or (K, H, 1, 1)


@register(SCALING, "qk_norm")
class QKNorm(Scaling):
    """QK-normalisation (Henry et al., 2020): L2-normalise each query and key, so the logits are cosine
    similarities, times a learned per-head scale g (init 10, about log2(L^2 - L) for sentence lengths L ~ 30).
    Bounded logits cannot saturate the softmax however q and k grow."""

    def __init__(self, *, heads: int, d_k: int, init: float = 10.0, members: int | None = None):
        super().__init__()
        self.log_scale = nn.Parameter(torch.full(_shape(members, heads), math.log(init)))

    def normalize(self, x: Tensor) -> Tensor:
        return F.normalize(x, dim=-1)

    def forward(self) -> Tensor:
        return self.log_scale.exp()[..., None, None]  # (H, 1, 1), or (K, H, 1, 1)
