"""What a training run shows while it trains: its progress file (RUN_DIR/progress.json, format in
ablate.run.progress_file), which a sweep's live view and `ablate status` read from other processes, and the terminal
progress bar of `ablate train` with the same fields, kept on one line (its metrics are cut at the terminal's edge, never
wrapped), or, where stdout is no terminal (a pipe, a log file), a plain line of them every PLAIN_EVERY_S seconds and
after each validation.

Epochs are shown one way everywhere: epochs completed, a partial one as its fraction (`epochs_done`: 0.97, then 1.00
once one whole epoch is trained), as summary.json's `epochs` records them; never Lightning's 0-based epoch index."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar
from lightning.pytorch.callbacks.progress.rich_progress import CustomBarColumn
from rich.progress import TextColumn
from rich.table import Column

from ablate.run.progress_file import format_eta, read_progress, write_progress

WINDOW_S = 30.0  # tokens/s and the pace of steps are measured over this much recent training time
VAL_METRICS = ("val/loss", "val/bleu")
PLAIN_EVERY_S = 30.0  # a plain progress line at most this often where stdout is no terminal


def epochs_done(trainer: L.Trainer) -> float | None:
    """Optimizer steps over the steps of an epoch, ceil(batches / accumulate) (Lightning steps on an epoch's last
    partial window), to 2 decimals as summary.json has them; None where the epoch's length is unknown (an endless loader)."""
    n = getattr(trainer, "num_training_batches", None)
    if not n or math.isinf(n):
        return None
    return round(trainer.global_step / math.ceil(n / max(1, trainer.accumulate_grad_batches)), 2)


class ProgressFile(L.Callback):
    """Keeps `state` (the fields of ablate.run.progress_file, plus `epochs`: `epochs_done`) current and writes it to
    RUN_DIR/progress.json from global rank 0."""

    of_the_trainer = True  # what the bar shows (`shown_fields`); a member's (ablate.run.member_progress) is not

    def __init__(self, out: str | Path, every_s: float = 2.0, may_stop_sooner: bool = False):
        self.out = Path(out)
        self.every_s = every_s
        self.state: dict[str, Any] = {
            "phase": "training",
            "step": 0,
            "max_steps": None,
            "epoch": 0,
            "epochs": None,
            "max_epochs": None,
            "tokens_per_s": None,
            "eta_s": None,
            "eta_upper": may_stop_sooner,
            "val/loss": None,
            "val/bleu": None,
            "val_step": None,
        }
        self._window: deque[tuple[float, int, int]] = deque()  # (training clock, target tokens so far, step)
        self._tokens = 0
        self._train_s = self._val_s = 0.0
        self._last_tick: float | None = None
        self._val_started: float | None = None
        self._after_val = "training"
        self._written = 0.0

    # -- clock: training time only, validation is counted apart -----------------------------------------------

    def _tick(self) -> None:
        now = time.perf_counter()
        if self._last_tick is not None:
            self._train_s += now - self._last_tick
        self._last_tick = now

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        total = trainer.estimated_stepping_batches
        self.state.update(
            max_steps=int(total) if math.isfinite(total) else None,
            max_epochs=trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else None,
            step=trainer.global_step,
            epoch=trainer.current_epoch,
            epochs=epochs_done(trainer),
            started=time.time(),
        )
        self._write(trainer, force=True)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._last_tick is None:
            self._last_tick = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._tick()
        if isinstance(batch, dict) and "tgt_tokens" in batch:
            self._tokens += int(batch["tgt_tokens"])
        self._window.append((self._train_s, self._tokens, trainer.global_step))
        while len(self._window) > 2 and self._train_s - self._window[1][0] >= WINDOW_S:
            self._window.popleft()
        self.state.update(step=trainer.global_step, epoch=trainer.current_epoch, epochs=epochs_done(trainer), **self._pace())
        self._write(trainer)

    def _pace(self) -> dict[str, float | None]:
        (t0, tok0, step0), (t1, tok1, step1) = self._window[0], self._window[-1]
        if t1 - t0 <= 0:
            return {}
        s_per_step = (t1 - t0) / (step1 - step0) if step1 > step0 else None
        total = self.state["max_steps"]
        eta = None
        if s_per_step is not None and total is not None:
            eta = (total - step1) * s_per_step * (1 + self._val_s / max(self._train_s, 1e-9))
        return {
            "tokens_per_s": round((tok1 - tok0) / (t1 - t0), 1) if tok1 > tok0 else None,
            "eta_s": None if eta is None else round(eta, 1),
        }

    def on_validation_start(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        self._val_started = time.perf_counter()
        self._after_val = "finished" if self.state["phase"] == "finished" else "training"  # the final weights' validation
        self.state["phase"] = "validating"
        self._write(trainer, force=True)

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or self._val_started is None:
            return
        elapsed = time.perf_counter() - self._val_started
        self._val_s += elapsed
        if self._last_tick is not None:
            self._last_tick += elapsed  # validation is not training time
        self._val_started = None
        metrics = self._validation(trainer, pl_module)
        self.state.update({key: round(float(metrics[key]), 4) for key in VAL_METRICS if key in metrics})
        self.state.update(phase=self._after_val, val_step=trainer.global_step)
        self._write(trainer, force=True)

    def _validation(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict:
        """The metrics of the validation just ended (the file shows its VAL_METRICS)."""
        return trainer.callback_metrics

    def on_train_end(self, trainer, pl_module) -> None:
        self.state.update(phase="finished", step=trainer.global_step, epochs=epochs_done(trainer), eta_s=0.0)
        self._write(trainer, force=True)

    def on_fit_end(self, trainer, pl_module) -> None:
        # A fit with nothing left to train (a resume after the last step, to run the end again) calls neither hook
        # above: without them the file said "training, step 0" for good.
        if self.state["phase"] == "training" and self.state.get("started") is None:
            self.on_train_start(trainer, pl_module)
            self.on_train_end(trainer, pl_module)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if self.state.get("started") is None and (earlier := read_progress(self.out)):
            self.state = earlier  # a resume stopped before it trained: the run is where its last attempt left it
        self.state.update(phase="stopped", eta_s=None)
        self._write(trainer, force=True)

    def _write(self, trainer: L.Trainer, force: bool = False) -> None:
        now = time.time()
        if not trainer.is_global_zero or (not force and now - self._written < self.every_s):
            return
        self._written = now
        with contextlib.suppress(OSError):  # a full or read-only disk must not stop training over a progress display
            write_progress(self.out, {**self.state, "updated": round(now, 3)})


def shown_fields(trainer: L.Trainer, logged: dict[str, Any]) -> dict[str, Any]:
    """What the bar and the plain lines show: step/total, epochs done (of the bound), tokens/s, the ETA of the whole
    run, what the module logs to the bar (`logged`: train/loss) and the latest validation."""
    progress = next((c for c in trainer.callbacks if isinstance(c, ProgressFile) and c.of_the_trainer), None)
    if progress is None:
        return dict(logged)
    s = progress.state
    shown = {
        "step": f"{s['step']}/{s['max_steps'] or '?'}",
        "epochs": "-" if s["epochs"] is None else f"{s['epochs']:.2f}" + (f"/{s['max_epochs']}" if s["max_epochs"] else ""),
        "tok/s": "-" if s["tokens_per_s"] is None else f"{s['tokens_per_s']:,.0f}",
        "ETA": format_eta(s["eta_s"], s["eta_upper"]),
    }
    shown.update(logged)  # train/loss (logged with prog_bar=True)
    shown.update({k: v for k in VAL_METRICS if (v := s[k]) is not None})
    return shown


class ProgressBar(RichProgressBar):
    """Lightning's rich bar, its metrics replaced by the run's progress (`shown_fields`), on one line: the bar takes
    the width the fields leave, and fields past the terminal's edge are cut (…), not wrapped onto a second line."""

    METRICS_COLUMN = Column(no_wrap=True, overflow="ellipsis")  # the fields: one line, cut at the terminal's edge

    def __init__(self) -> None:
        super().__init__(leave=True)

    def _get_train_description(self, current_epoch: int) -> str:
        # Not Lightning's "Epoch 0/9": its 0-based epoch index would be a second way of counting epochs beside
        # `epochs` (0.97 after most of the first one); the bar's fields say how far the run is.
        return f"{'Training':{len(self.validation_description)}}"  # as wide as "Validation": no flicker between them

    def configure_columns(self, trainer: L.Trainer) -> list:
        # Lightning's batch count, elapsed/remaining time and it/s would repeat step, ETA and tok/s on the same line.
        return [
            TextColumn("[progress.description]{task.description}", table_column=Column(no_wrap=True)),
            CustomBarColumn(
                bar_width=None,  # what the description and the fields leave
                complete_style=self.theme.progress_bar,
                finished_style=self.theme.progress_bar_finished,
                pulse_style=self.theme.progress_bar_pulse,
            ),
        ]

    def _init_progress(self, trainer: L.Trainer) -> None:
        super()._init_progress(trainer)
        if self._metric_component is not None:  # Lightning's metrics column, which would wrap
            self._metric_component._table_column = self.METRICS_COLUMN

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        items = {k: v for k, v in super().get_metrics(trainer, pl_module).items() if k != "v_num"}
        return shown_fields(trainer, items)


class PlainProgress(L.Callback):
    """`ablate train` with stdout a pipe or a file: the bar's fields as a plain line every `every_s` seconds of
    training and after each validation, so a log shows how far the run is (a bar there would print once, at the end)."""

    def __init__(self, every_s: float = PLAIN_EVERY_S, out=None):
        self.every_s, self.out = every_s, out
        self._printed: float | None = None

    def _print(self, trainer: L.Trainer, what: str) -> None:
        logged = {k: v for k, v in trainer.progress_bar_metrics.items() if k != "v_num"}
        fields = shown_fields(trainer, logged)
        text = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in fields.items())
        print(f"{what}: {text}", file=self.out or sys.stdout, flush=True)
        self._printed = time.perf_counter()

    def on_train_start(self, trainer, pl_module) -> None:
        self._printed = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.is_global_zero and time.perf_counter() - (self._printed or 0.0) >= self.every_s:
            self._print(trainer, "training")

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.is_global_zero and not trainer.sanity_checking and trainer.state.fn == "fit":
            self._print(trainer, "validated")
