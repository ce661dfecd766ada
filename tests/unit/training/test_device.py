"""Where a run trains, as Lightning will read train.accelerator."""

from __future__ import annotations

import pytest
import torch

from ablate.config import TrainConfig
from ablate.training.device import trains_on_cpu


@pytest.mark.parametrize(
    "accelerator, cuda, mps, on_cpu",
    [("cpu", True, False, True), ("gpu", False, False, False), ("cuda", False, False, False), ("mps", False, False, False),
     ("auto", False, False, True), ("auto", True, False, False), ("auto", False, True, False)],
)  # fmt: skip
def test_a_run_trains_on_the_cpu_when_told_or_when_auto_finds_no_gpu(monkeypatch, accelerator, cuda, mps, on_cpu):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert trains_on_cpu(TrainConfig(accelerator=accelerator)) is on_cpu
