"""`build_trainer`: the one place `ablate train`'s Trainer is assembled, which benchmarks/step_overhead.py times too."""

from __future__ import annotations

import lightning as L
import pytest
from helpers import tiny_experiment

from ablate.registry import register, restoring
from ablate.run.callbacks import CALLBACKS, Preemption
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


def test_a_callback_a_plugin_registers_is_in_every_trainer_and_leaves_with_its_registration(tmp_path):
    """A researcher's own callback (docs/variants.md): registered in CALLBACKS, built with no arguments per run."""
    cfg = tiny_experiment(tmp_path, train={"max_steps": 7})
    module = TranslationModule.from_config(cfg, 64)
    (tmp_path / "run").mkdir()
    with restoring(CALLBACKS):

        @register(CALLBACKS, "count-steps")
        class CountSteps(L.Callback):
            pass

        first, _ = build_trainer(cfg, tmp_path / "run", 64, module, 0, [])
        second, _ = build_trainer(cfg, tmp_path / "run", 64, module, 0, [])
        mine = [c for c in first.callbacks + second.callbacks if isinstance(c, CountSteps)]
        assert len(mine) == 2 and mine[0] is not mine[1]  # one of its own per run
    again, _ = build_trainer(cfg, tmp_path / "run", 64, module, 0, [])
    assert not any(type(c).__name__ == "CountSteps" for c in again.callbacks)
    with pytest.raises(TypeError, match="must subclass"):
        register(CALLBACKS, "not-a-callback")(object)
