"""The trial's side of pruning: report the metric to Optuna after each validation and stop when it says so (for a
member group, each member to its own trial, and a pruned member stops alone). Kept out of ablate.sweep.trial, whose
worker side must load without Lightning."""

from __future__ import annotations

import lightning as L
import optuna

from ablate.run.callbacks import fit_validation
from ablate.run.exits import PRUNED
from ablate.run.member_runs import MemberRuns
from ablate.run.member_stops import DIVERGED
from ablate.run.stopping import stop_run


class PruningCallback(L.Callback):
    def __init__(self, trial: optuna.Trial, metric: str):
        self.trial, self.metric, self.pruned = trial, metric, False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or self.metric not in trainer.callback_metrics:
            return
        prune = False
        if trainer.is_global_zero:
            self.trial.report(float(trainer.callback_metrics[self.metric]), step=trainer.global_step)
            prune = fit_validation(trainer) and self.trial.should_prune()
        if trainer.strategy.broadcast(prune):
            self.pruned = True
            stop_run(trainer, PRUNED)  # the run's summary says why it stopped


class MemberPruning(L.Callback):
    """Each member of a group reports to its own trial; one its pruner stops is frozen with stop_reason "pruned".
    After MemberRuns in the callbacks, which records the validation first (ablate.run.member_runs)."""

    def __init__(self, trials: list[optuna.Trial], metric: str, runs: MemberRuns):
        self.trials, self.metric, self.runs = trials, metric, runs

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        step = trainer.global_step
        for k, (trial, metrics) in enumerate(zip(self.trials, pl_module.member_metrics)):
            reason = self.runs.stops.reason[k]
            # A member its own rule stopped at this very validation reports it, as a run reports the validation its
            # rule stops at; one stopped before, or diverged, has no value here.
            if (reason is not None and self.runs.validated_step[k] != step) or reason == DIVERGED or self.metric not in metrics:
                continue
            trial.report(float(metrics[self.metric]), step=step)
            if reason is None and fit_validation(trainer) and trial.should_prune():
                self.runs.stop(k, PRUNED, trainer, pl_module)
