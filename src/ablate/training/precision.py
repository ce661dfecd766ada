"""`Precision`: train.precision made into one object, once, from the config, and passed down. It says what a run's
float32 matmuls compute in, the arithmetic a step's FLOPs run in (what MFU divides by), the dtype the model's
parameters are built in, and the one way every decode outside the Trainer runs (`decoding`): `ablate evaluate`,
`translate`, `table --split test` and a run's own evaluation record score a model in the arithmetic it trained and
validated in (Lightning's precision plugin autocasts validation; an fp32 decode of a bf16-trained model scores otherwise).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch

from ablate.config import TrainConfig

HALF = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}  # the mixed precisions and the dtype each autocasts to


@dataclass(frozen=True)
class Precision:
    name: str  # Lightning's: "32", "bf16-mixed", "16-mixed", "64"
    matmul: str  # torch's float32 matmul precision for the run: "highest" (fp32), "high" (TF32), "medium"

    @classmethod
    def of(cls, t: TrainConfig) -> Precision:
        """train.precision with train.matmul_precision, else "high" (TF32) under mixed precision, whose fp32
        remainder is not what the run measures, and "highest" in fp32, which promises fp32 arithmetic."""
        return cls(t.precision, t.matmul_precision or ("high" if t.precision in HALF else "highest"))

    @property
    def half(self) -> torch.dtype | None:
        """The dtype autocast runs matmuls in under mixed precision; None otherwise."""
        return HALF.get(self.name)

    @property
    def params_dtype(self) -> torch.dtype:
        """What the model's parameters are held in: float64 for "64" (from the start: Lightning restores a
        checkpoint's weights before its precision plugin converts the module, and float32 parameters would round
        them), float32 otherwise (mixed precision keeps fp32 master weights)."""
        return torch.float64 if self.name == "64" else torch.float32

    def arithmetic(self) -> str:
        """bf16 | fp16 | fp64 | tf32 | fp32: what the run's matmuls compute in (the FLOP/s peak MFU divides by)."""
        if self.half is not None:
            return "bf16" if self.half == torch.bfloat16 else "fp16"
        if self.name == "64":
            return "fp64"
        return "fp32" if self.matmul == "highest" else "tf32"

    def set_matmul(self) -> None:
        torch.set_float32_matmul_precision(self.matmul)

    @contextmanager
    def decoding(self, device: torch.device) -> Iterator[None]:
        """The run's arithmetic for a forward pass outside the Trainer: its matmul precision, and autocast to its
        half type under mixed precision (the process's matmul precision restored afterwards)."""
        before = torch.get_float32_matmul_precision()
        self.set_matmul()
        cast = torch.autocast(device.type, dtype=self.half) if self.half is not None else nullcontext()
        try:
            with cast:
                yield
        finally:
            torch.set_float32_matmul_precision(before)
