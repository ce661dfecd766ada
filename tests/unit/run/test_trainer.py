"""What a training process sets up before it builds anything (ablate.run.trainer.prepare_process)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from ablate.config import ExperimentConfig, TrainConfig
from ablate.run.trainer import prepare_process


@pytest.mark.parametrize("accelerator", ["cpu", "auto"])
def test_16_mixed_on_a_cpu_is_refused_where_lightning_would_train_bf16_and_ablate_score_fp16(monkeypatch, accelerator):
    """Lightning swaps 16-mixed for bf16-mixed on a CPU with only a log warning; ablate's decoding and MFU would still
    read the config's fp16."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    before = torch.get_float32_matmul_precision()
    cfg = ExperimentConfig(train=TrainConfig(precision="16-mixed", accelerator=accelerator))
    with pytest.raises(
        ValueError, match=rf"train.precision=16-mixed needs a GPU, and this run trains on the CPU \(train.accelerator={accelerator}"
    ):
        prepare_process(cfg)
    assert torch.get_float32_matmul_precision() == before  # refused before it set anything
    bf16 = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision="bf16-mixed"))
    assert prepare_process(bf16).arithmetic() == "bf16"
    torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize(
    "train, message",
    [
        ({"accelerator": "foo"}, "train.accelerator='foo' is none of auto, cpu, cuda, gpu, mps, tpu"),
        ({"accelerator": "gpu"}, "train.accelerator=gpu: this machine has no cuda or mps device; use train.accelerator=auto"),
        ({"accelerator": "cuda"}, "train.accelerator=cuda: this machine has no cuda device"),
        ({"strategy": "foo"}, "train.strategy='foo' is not a strategy Lightning knows"),
    ],
)
def test_an_accelerator_or_strategy_lightning_would_refuse_is_refused_before_anything_is_set(monkeypatch, train, message):
    """Front-door review: Lightning refused these only after the data was read and config.yaml written, `gpu` without a
    GPU as a traceback, and the corrected command was then refused for the run left in out_dir."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        prepare_process(ExperimentConfig(train=TrainConfig(**train)))
    prepare_process(ExperimentConfig(train=TrainConfig(accelerator="cpu", strategy="ddp")))  # known and here: no refusal
    prepare_process(ExperimentConfig(train=TrainConfig(accelerator="cpu", strategy="DDP")))  # Lightning lowercases a strategy
    with pytest.raises(ValueError, match="train.accelerator='CPU' is none of auto, cpu"):  # not an accelerator (fixes review)
        prepare_process(ExperimentConfig(train=TrainConfig(accelerator="CPU")))
    from lightning.pytorch.accelerators import AcceleratorRegistry

    mps = AcceleratorRegistry["mps"]["accelerator"]
    monkeypatch.setattr(mps, "is_available", staticmethod(lambda: True))  # Apple silicon: gpu is its mps (diff review)
    prepare_process(ExperimentConfig(train=TrainConfig(accelerator="gpu")))
