"""Where a run trains, read from its train section as Lightning will read it, before any Trainer exists."""

from __future__ import annotations

import torch

from ablate.config import TrainConfig


def trains_on_cpu(t: TrainConfig) -> bool:
    """`cpu`, or `auto` on a machine with neither CUDA nor MPS: what a 16-mixed check and a run's first step ask."""
    if t.accelerator != "auto":
        return t.accelerator == "cpu"
    return not torch.cuda.is_available() and not torch.backends.mps.is_available()
