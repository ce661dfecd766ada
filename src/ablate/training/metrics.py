"""Training speed: `SpeedCallback` measures real (non-pad) tokens per second, step time, model FLOP/s and MFU, and
peak memory, excluding validation, and keeps an end-of-run summary that also says how long validation took.
(Translation quality, BLEU and chrF, is ablate.evaluation.scores.)
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable

import lightning as L
import torch

from ablate.training.flops import peak_flops
from ablate.training.precision import Precision


def peak_memory_mb(device: torch.device | None = None) -> float:
    """Peak GPU memory allocated by torch on CUDA; the process's peak RSS on CPU."""
    if device is not None and device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes on macOS, KiB on Linux


class SpeedCallback(L.Callback):
    """Logs speed/src_tokens_per_s, speed/tgt_tokens_per_s, speed/tokens_per_s (target side, the field's
    convention), speed/step_ms and speed/peak_mem_mb every `every` optimizer steps; with `flops` (batch -> model
    FLOPs of its training step, see ablate.training.flops) also speed/model_tflops, and speed/mfu where the device's peak
    is known (`peak_tflops`, or Lightning's table of GPUs). All per device.

    Clock time spent in validation is excluded; the interval is wall time between batch ends, so no
    extra host-device synchronisation is added to the training step. The summary counts validation apart:
    speed/val_seconds and speed/validations cover every validation this trainer runs, in fit and in a
    `trainer.validate()` after it (ablate.run.train's validation of the final weights), but not Lightning's sanity
    check, which decodes nothing and is left out entirely.

    The totals travel in the run's checkpoints, so a resumed run's summary covers every attempt's training up to its
    checkpoint (steps lost to a kill, trained again, count once), and a resume with no step left to train still has it.
    """

    def __init__(
        self,
        every: int = 50,
        flops: Callable[[dict], float] | None = None,
        peak_tflops: float | None = None,
        precision: Precision | None = None,
    ):
        self.every, self.flops, self.peak_tflops = every, flops, peak_tflops
        self.precision = precision or Precision("32", "highest")  # the run's (ablate.training.precision)
        self.peak: float | None = None  # FLOP/s, set at train start once the device is known
        self._summary: dict[str, float] = {}
        self._earlier_peak_mb = 0.0  # the peak memory of the attempts before a resume, from the checkpoint
        self._device: torch.device | None = None
        self._accumulate = 1
        self._total = self._zero()
        self._window = self._zero()
        self._t: float | None = None
        self._paused_at: float | None = None
        self._val_start = 0.0
        self._val = {"speed/val_seconds": 0.0, "speed/validations": 0}

    @staticmethod
    def _zero() -> dict:
        return {"src": 0, "tgt": 0, "batches": 0, "seconds": 0.0, "flops": 0.0}

    def on_train_start(self, trainer, pl_module) -> None:
        self._device, self._accumulate = pl_module.device, trainer.accumulate_grad_batches
        if self.flops is not None:
            self.peak = peak_flops(pl_module.device, self.precision, self.peak_tflops)

    def _tick(self) -> float:
        now = time.perf_counter()
        dt = 0.0 if self._t is None else now - self._t
        self._t = now
        return dt

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._t is None:
            self._t = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        dt = self._tick()
        src, tgt = int(batch["src_tokens"]), int(batch["tgt_tokens"])
        flops = 0.0 if self.flops is None else self.flops(batch)
        for acc in (self._total, self._window):
            acc["src"] += src
            acc["tgt"] += tgt
            acc["batches"] += 1
            acc["seconds"] += dt
            acc["flops"] += flops
        if self._window["batches"] >= self.every * trainer.accumulate_grad_batches:
            metrics = self._rates(self._window, trainer.accumulate_grad_batches)
            for logger in trainer.loggers:  # on train/loss's row: Lightning logs update N's at step N - 1
                logger.log_metrics(metrics, step=max(trainer.global_step - 1, 0))
            self._window = self._zero()

    def on_validation_start(self, trainer, pl_module) -> None:
        self._val_start = time.perf_counter()
        if self._t is not None:
            self._paused_at = self._val_start

    def on_validation_end(self, trainer, pl_module) -> None:
        now = time.perf_counter()
        if not trainer.sanity_checking:
            self._val["speed/val_seconds"] += now - self._val_start
            self._val["speed/validations"] += 1
            if self._summary:  # a validation after fit ended: the summary is already written, keep it whole
                self._summary.update(self._val)
        if self._paused_at is not None:
            self._t += now - self._paused_at  # validation is not training time
            self._paused_at = None

    def on_train_end(self, trainer, pl_module) -> None:
        self._summary = self._whole_run()

    @property
    def summary(self) -> dict[str, float]:
        """The run's figures: from its training's end, or, where this attempt trained nothing (a resume whose checkpoint
        is the last step: Lightning skips the train hooks), from the earlier attempts' totals; empty without either."""
        if not self._summary and self._total["batches"]:
            self._summary = self._whole_run()
        return self._summary

    def _whole_run(self) -> dict[str, float]:
        """The summary's figures: the rates over all training (this attempt's and the checkpoint's), its seconds, and
        validation's."""
        return {**self._rates(self._total, self._accumulate), "speed/train_seconds": self._total["seconds"], **self._val}

    def state_dict(self) -> dict:
        return {
            "total": dict(self._total),
            "val": dict(self._val),
            "accumulate": self._accumulate,
            "peak_mem_mb": self._peak_mb(),
            "peak_flops": self.peak,
        }

    def load_state_dict(self, state: dict) -> None:
        self._total = {**self._zero(), **state.get("total", {})}
        self._val = {**self._val, **state.get("val", {})}
        self._accumulate = int(state.get("accumulate", 1))
        self._earlier_peak_mb = float(state.get("peak_mem_mb", 0.0))
        self.peak = state.get("peak_flops")  # for speed/mfu where this attempt trains nothing; on_train_start sets it again

    def _peak_mb(self) -> float:
        """The run's peak memory: this process's on its device, or an earlier attempt's where that was higher (or where
        this attempt never trained: its process's own peak is no training's)."""
        if self._device is None:
            return self._earlier_peak_mb
        return max(self._earlier_peak_mb, peak_memory_mb(self._device))

    def _rates(self, acc: dict, accumulate: int) -> dict[str, float]:
        seconds = max(acc["seconds"], 1e-9)
        rates = {
            "speed/src_tokens_per_s": acc["src"] / seconds,
            "speed/tgt_tokens_per_s": acc["tgt"] / seconds,
            "speed/tokens_per_s": acc["tgt"] / seconds,
            "speed/step_ms": 1000 * seconds / max(acc["batches"], 1) * accumulate,
            "speed/peak_mem_mb": self._peak_mb(),
        }
        if self.flops is not None:
            rates["speed/model_tflops"] = acc["flops"] / seconds / 1e12
            if self.peak:
                rates["speed/mfu"] = acc["flops"] / seconds / self.peak
        return rates
