"""train.precision in one place: the float32 matmul precision that goes with it, the arithmetic a step's FLOPs run in
(what MFU divides by), and the autocast every decode outside the Trainer runs under, so `ablate evaluate`, `ablate
translate` and `ablate table --split test` score a model in the arithmetic it trained and validated in (Lightning's
precision plugin autocasts validation during training; an fp32 decode of a bf16-trained model scores otherwise)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch

from ablate.config import TrainConfig

HALF = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}  # the mixed precisions and the dtype each autocasts to


def matmul_precision(t: TrainConfig) -> str:
    """train.matmul_precision, else "high" (TF32) under mixed precision, whose fp32 remainder is not what the run
    measures, and "highest" in fp32, which promises fp32 arithmetic."""
    return t.matmul_precision or ("high" if t.precision in HALF else "highest")


def set_matmul_precision(t: TrainConfig) -> None:
    torch.set_float32_matmul_precision(matmul_precision(t))


def arithmetic(precision: str) -> str:
    """bf16 | fp16 | fp64 | tf32 | fp32: what a run's matmuls compute in (Lightning's precision, e.g. "bf16-mixed", and
    for fp32 the matmul precision set now: TF32 when it allows it)."""
    if "bf16" in precision:
        return "bf16"
    if "16" in precision:
        return "fp16"
    if "64" in precision:
        return "fp64"
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "fp32"


@contextmanager
def decoding(t: TrainConfig, device: torch.device) -> Iterator[None]:
    """The run's arithmetic for a decode outside the Trainer: its matmul precision, and autocast to its half type
    under mixed precision (restored afterwards)."""
    before = torch.get_float32_matmul_precision()
    set_matmul_precision(t)
    cast = torch.autocast(device.type, dtype=HALF[t.precision]) if t.precision in HALF else nullcontext()
    try:
        with cast:
            yield
    finally:
        torch.set_float32_matmul_precision(before)
