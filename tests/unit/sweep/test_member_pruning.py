"""A member group's pruning (ablate.sweep.pruning.MemberPruning): each member reports to its own trial every validation
a run of its own would report, the one its own rule stops at included, and is pruned alone."""

from __future__ import annotations

from types import SimpleNamespace

import optuna
from lightning.pytorch.trainer.states import TrainerFn

from ablate.run.member_stops import DIVERGED
from ablate.sweep.pruning import MemberPruning


class Runs:
    def __init__(self, reasons: list, validated: list):
        self.stops = SimpleNamespace(reason=reasons)
        self.validated_step, self.stopped = validated, []

    def stop(self, k, reason, trainer, pl_module):
        self.stops.reason[k] = reason
        self.stopped.append(k)


def test_each_member_reports_what_a_run_would_and_only_a_training_one_is_pruned():
    study = optuna.create_study(pruner=optuna.pruners.ThresholdPruner(upper=5.0))
    trials = [study.ask() for _ in range(5)]
    # 0 trains; 1 stopped by its own rule at this validation; 2 stopped at an earlier one; 3 diverged now; 4 trains, badly
    runs = Runs([None, "early_stopping", "converged", DIVERGED, None], [20, 20, 10, 20, 20])
    metrics = [{"val/loss": 3.0}, {"val/loss": 3.5}, {"val/loss": 9.0}, {"val/loss": float("nan")}, {"val/loss": 7.0}]
    trainer = SimpleNamespace(sanity_checking=False, global_step=20, state=SimpleNamespace(fn=TrainerFn.FITTING))
    MemberPruning(trials, "val/loss", runs).on_validation_end(trainer, SimpleNamespace(member_metrics=metrics))
    reported = [study._storage.get_trial(t._trial_id).intermediate_values for t in trials]
    assert reported == [{20: 3.0}, {20: 3.5}, {}, {}, {20: 7.0}]
    assert runs.stopped == [4] and runs.stops.reason[1] == "early_stopping"  # above the threshold: pruned, alone
