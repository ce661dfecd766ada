"""When a run stops, besides max_steps / max_epochs: a model-FLOPs or wall-clock budget (rows compared at equal
compute or time), early stopping on a validation metric, and the issue's convergence rule (val PPL improves by
less than 2% over the last fifth of training). The basis a run's summary records is ablate.run.basis's.

Every rule's state (FLOPs, wall time, the validation history) travels in the checkpoint, so a resumed run counts
on from where it stopped, and a run resumed after a rule fired stops again at once. A preempted or interrupted run
writes no summary: it is not finished, and `stop_reason` is only ever the reason a finished run stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import lightning as L
import torch

from ablate.config import TrainConfig
from ablate.run.callbacks import fit_validation, mid_accumulation
from ablate.run.exits import PRUNED

STOP_REASONS = ("max_steps", "max_epochs", "max_time", "max_flops", "early_stopping", "converged", PRUNED)
MODES = {"val/loss": "min", "val/ppl": "min", "val/bleu": "max"}
REPORT_WINDOW = 0.2  # summary.json reports the convergence rule over the last fifth when train.converge_window is off


MIN_WINDOW = 3  # validations the window must hold before the rule judges: with one or two, a noisy flat pair
# fires it (a pilot at a high learning rate "converged" at 2,000 updates on one validation 0.9% better than the last)


def convergence_improvement(ppl: list[float], window: float) -> float | None:
    """How much better (relative) the best val/ppl of the last `window` share of the validations is than the best
    before them; None while that share holds fewer than MIN_WINDOW validations (3 / window validations in all)."""
    w = int(len(ppl) * window + 1e-9)
    if w < MIN_WINDOW or w >= len(ppl):
        return None
    before, last = min(ppl[:-w]), min(ppl[-w:])
    if not math.isfinite(last):  # only non-finite values lately: no verdict (the NaN guard ends such a run)
        return None
    return 1.0 if not math.isfinite(before) else (before - last) / before


def convergence_report(ppl: list[float], window: float, tol: float) -> dict:
    """summary.json's convergence block: the rule over validations `ppl` (over the last fifth when the rule is off)."""
    window = window or REPORT_WINDOW
    improvement = convergence_improvement(ppl, window)
    return {
        "window": window,
        "tol": tol,
        "validations": len(ppl),
        "improvement": None if improvement is None else round(improvement, 5),
        "converged": None if improvement is None else improvement < tol,
    }


class EarlyStopping:
    """Stop after `patience` validations in a row without a relative improvement of more than `min_delta`."""

    def __init__(self, metric: str, patience: int, min_delta: float):
        self.metric, self.patience, self.min_delta = metric, patience, min_delta
        self.sign = 1.0 if MODES[metric] == "min" else -1.0  # compare as "lower is better"
        self.best: float | None = None
        self.bad = 0  # validations since the last improvement

    def update(self, value: float) -> None:
        v = self.sign * value if math.isfinite(value) else math.inf
        if self.best is None or v < (self.best - self.min_delta * abs(self.best) if math.isfinite(self.best) else self.best):
            self.best, self.bad = v, 0
        else:
            self.bad += 1

    @property
    def done(self) -> bool:
        return self.bad >= self.patience


class StopRules(L.Callback):
    """The budgets and rules of `cfg.train` (see the schema); counts the run's model FLOPs (`flops`: batch -> FLOPs
    of its training step, as `SpeedCallback` uses) and wall time. Budgets are checked at optimizer-step
    boundaries, never inside gradient accumulation; the rules after each validation. Lightning validates once
    more when a budget stops the run, so checkpoints and metrics are of the final weights."""

    def __init__(self, t: TrainConfig, flops: Callable[[dict], float] | None):
        self.flops_fn, self.max_flops, self.max_time = flops, t.max_flops, t.max_time_seconds
        self.window, self.tol = t.converge_window, t.converge_tol
        self.early = EarlyStopping(t.early_stop_metric, t.patience, t.min_delta) if t.early_stop_metric else None
        self.flops, self.seconds_before, self.ppl = 0.0, 0.0, []  # FLOPs (all ranks), wall time, val/ppl history
        self.reason: str | None = None
        self.validated_step: int | None = None  # the step of this fit's last validation: the final weights' when equal
        self._pending = 0.0  # this rank's FLOPs since the last step boundary
        self._started: float | None = None

    @property
    def seconds(self) -> float:
        return self.seconds_before + (time.perf_counter() - self._started if self._started is not None else 0.0)

    def state_dict(self) -> dict:
        early = None if self.early is None else {"metric": self.early.metric, "best": self.early.best, "bad": self.early.bad}
        return {"flops": self.flops, "seconds": self.seconds, "ppl": list(self.ppl), "early": early}

    def load_state_dict(self, state: dict) -> None:
        self.flops, self.seconds_before, self.ppl = float(state["flops"]), float(state["seconds"]), list(state["ppl"])
        early = state.get("early")
        if self.early is not None and early and early["metric"] == self.early.metric:
            self.early.best, self.early.bad = early["best"], early["bad"]

    def _stop(self, trainer: L.Trainer, reason: str | None) -> None:
        if reason is not None:
            self.reason = self.reason or reason
            trainer.should_stop = True

    def _budget_spent(self) -> str | None:
        if self.max_flops is not None and self.flops >= self.max_flops:
            return "max_flops"
        if self.max_time is not None and self.seconds >= self.max_time:
            return "max_time"
        return None

    def _rule_met(self) -> str | None:
        if self.early is not None and self.early.done:
            return "early_stopping"
        if self.window:
            improvement = convergence_improvement(self.ppl, self.window)
            if improvement is not None and improvement < self.tol:
                return "converged"
        return None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._started = time.perf_counter()
        self._stop(trainer, self._budget_spent() or self._rule_met())  # resumed after a rule had fired: done at once

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.seconds_before, self._started = self.seconds, None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int) -> None:
        if self.flops_fn is not None:
            self._pending += self.flops_fn(batch)
        if mid_accumulation(trainer):
            return
        pending, self._pending = self._pending, 0.0
        if trainer.world_size > 1:  # every rank's batches count, and every rank must stop at the same step
            pending = float(trainer.strategy.reduce(torch.tensor(pending, device=pl_module.device), reduce_op="sum"))
        self.flops += pending
        reason = self._budget_spent()
        if self.max_time is not None and trainer.world_size > 1:  # clocks differ between ranks: agree on stopping
            stop = trainer.strategy.reduce_boolean_decision(reason is not None, all=False)
            reason = (reason or "max_time") if stop else None
        self._stop(trainer, reason)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not fit_validation(trainer):
            return
        self.validated_step = trainer.global_step
        metrics = trainer.callback_metrics
        if "val/ppl" in metrics:
            ppl = float(metrics["val/ppl"])
            self.ppl.append(ppl if math.isfinite(ppl) else math.inf)
        if self.early is not None and self.early.metric in metrics:
            self.early.update(float(metrics[self.early.metric]))
        reason = self._rule_met()
        if trainer.world_size > 1:  # each rank computes the metrics itself: agree on stopping
            stop = trainer.strategy.reduce_boolean_decision(reason is not None, all=False)
            reason = (reason or "early_stopping") if stop else None
        self._stop(trainer, reason)

    def summary(self, trainer: L.Trainer, t: TrainConfig) -> dict:
        """summary.json's stop_reason, FLOPs and wall time (the whole run, resumes included) and convergence report."""
        reason = self.reason
        if reason is None and trainer.global_step >= t.max_steps:
            reason = "max_steps"
        elif reason is None and t.max_epochs and trainer.current_epoch >= t.max_epochs:
            reason = "max_epochs"
        return {
            "stop_reason": reason or "other",
            "flops": self.flops,
            "wall_seconds": round(self.seconds, 1),
            "convergence": convergence_report(self.ppl, self.window, self.tol),
        }


def stop_run(trainer: L.Trainer, reason: str) -> None:
    """Stop training for a reason of the caller's (a sweep's pruner: "pruned"), recorded as the summary's
    stop_reason like the rules' own."""
    if reason not in STOP_REASONS:
        raise ValueError(f"unknown stop reason {reason!r}; one of {STOP_REASONS}")
    rules = next((c for c in trainer.callbacks if isinstance(c, StopRules)), None)
    if rules is not None:
        rules._stop(trainer, reason)
    else:
        trainer.should_stop = True
