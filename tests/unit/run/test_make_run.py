"""`build_trainer`: the one place `ablate train`'s Trainer is assembled, which benchmarks/step_overhead.py times too."""

from __future__ import annotations

import lightning as L
from helpers import tiny_experiment

from ablate.run.callbacks import Preemption
from ablate.run.stopping import StopRules
from ablate.run.trainer import build_trainer
from ablate.training.metrics import SpeedCallback
from ablate.training.module import TranslationModule


def test_build_trainer_wires_speed_stop_preemption_then_the_callers_callbacks_and_the_csv_logger(tmp_path):
    cfg = tiny_experiment(tmp_path, train={"max_steps": 7, "clip_grad": 0.5, "peak_tflops": 3.0})
    module = TranslationModule.from_config(cfg, 64)
    mine = L.Callback()
    out = tmp_path / "run"
    out.mkdir()
    trainer, parts = build_trainer(cfg, out, 64, module, 0, [mine])
    kinds = [type(c) for c in trainer.callbacks]
    assert kinds.index(SpeedCallback) < kinds.index(StopRules) < kinds.index(Preemption) < trainer.callbacks.index(mine)
    assert parts.speed in trainer.callbacks and parts.stop in trainer.callbacks and parts.preemption in trainer.callbacks
    assert parts.speed.peak_tflops == 3.0 and parts.speed.flops is not None
    assert parts.extra["vocab_size"] == 64 and parts.extra["params/total"] == module.params["total"]
    assert parts.wandb_logger is None and [type(lg).__name__ for lg in trainer.loggers] == ["RunCSVLogger"]  # logging.wandb off
    assert trainer.max_steps == 7 and trainer.gradient_clip_val == 0.5
