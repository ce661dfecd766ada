"""Dropout (Sec. 5.4) with a faster mask on CPU.

On CPU, `torch.bernoulli_`, which `F.dropout` uses, draws one 32-bit random number per element and was 6-9% of a
Transformer training step in our profiles. Here each element takes 16 random bits (one int64 draw feeds four
elements) and keeps itself if they clear a threshold, so p is exact to 1/65536. Same expectation, about half the
time (with `_MaskedScale`); CUDA and other devices keep `F.dropout`. Both draw from torch's default generator, so runs stay seeded.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _random_int16(shape: torch.Size, device: torch.device) -> Tensor:
    n = shape.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), 2**63 - 1)
    return words.view(torch.int16)[:n].view(shape)  # four uniform int16 values per int64


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> Tensor:
    """Bool tensor of `shape`, each element True with probability 1 - p (to within 1/65536)."""
    return _random_int16(shape, device) >= round(p * 65536) - 32768


def member_factors(rates: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """Each member's mask threshold (K, 1) int32 (keep with 1 - rates[k]) and scale (K, 1) in `dtype`."""
    thresholds = (rates * 65536).round().to(torch.int32) - 32768
    scale = torch.where(rates < 1, 1.0 / (1.0 - rates).clamp(min=1e-12), torch.zeros_like(rates))
    return thresholds[:, None], scale[:, None].to(dtype)


def member_keep_mask(shape: torch.Size, thresholds: Tensor) -> Tensor:
    """Bool tensor of `shape` (member-major rows, K = len(thresholds)) viewed as (K, n/K)."""
    return _random_int16(shape, thresholds.device).view(thresholds.size(0), -1) >= thresholds


class _MaskedScale(torch.autograd.Function):
    """x * keep / (1 - p), saving only the bool mask (1 byte an element) for backward. A float multiply is
    about 6x faster on CPU than `torch.where` or a multiply by a bool tensor, so the mask is widened per use."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x * keep.to(x.dtype).mul_(scale)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (keep,) = ctx.saved_tensors
        return grad * keep.to(grad.dtype).mul_(ctx.scale), None, None


class _MemberMaskedScale(torch.autograd.Function):
    """`_MaskedScale` with a scale per member: keep (K, n/K) bool, scale (K, 1)."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: Tensor) -> Tensor:
        ctx.save_for_backward(keep, scale)
        return (x.reshape(keep.shape) * keep.to(x.dtype).mul_(scale.to(x.dtype))).view(x.shape)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        keep, scale = ctx.saved_tensors
        return (grad.reshape(keep.shape) * keep.to(grad.dtype).mul_(scale.to(grad.dtype))).view(grad.shape), None, None


def member_dropout(x: Tensor, factors: tuple[Tensor, Tensor], training: bool) -> Tensor:
    """Dropout of a member-major batch (K*B, ...) at member k's own rate (`member_factors`); one mask and one multiply
    for all members, on every device (the same operations whatever the rates, so a step's work does not depend on K)."""
    if not training:
        return x
    thresholds, scale = factors
    return _MemberMaskedScale.apply(x, member_keep_mask(x.shape, thresholds), scale)


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p == 1.0:
        return F.dropout(x, p, training)
    return _MaskedScale.apply(x, keep_mask(x.shape, p, x.device), 1.0 / (1.0 - p))


class Dropout(nn.Module):
    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p
        self.register_buffer("rates", None, persistent=False)  # per member (K,), set by set_member_rates; then p is unused
        self._factors: tuple | None = None  # ((device, rates dtype, input dtype), member_factors of them)

    def set_member_rates(self, rates: Tensor) -> None:
        if not bool(((rates >= 0) & (rates <= 1)).all()):
            raise ValueError(f"dropout probabilities must be in [0, 1], got {rates.tolist()}")
        self.rates = rates.detach().clone()
        self._factors = None

    def _member_factors(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """`member_factors` once per device and dtype, not a dozen small operations every call."""
        key = (self.rates.device, self.rates.dtype, x.dtype)
        if self._factors is None or self._factors[0] != key:
            with torch.inference_mode(False):  # built under an evaluation's inference mode, they would refuse training
                self._factors = (key, member_factors(self.rates, x.dtype))
        return self._factors[1]

    def forward(self, x: Tensor) -> Tensor:
        if self.rates is not None:
            return member_dropout(x, self._member_factors(x), self.training)
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}" if self.rates is None else f"rates={self.rates.tolist()}"
