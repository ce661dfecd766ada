"""One sweep trial in its own process: `python -m ablate.trial TRIAL.yaml` (started by ablate.study).

Reports the objective metric at every validation to the Optuna trial, so the study's pruner can
stop a bad trial early; a pruned trial exits with code 3 after writing its summary.
"""

from __future__ import annotations

import os
import sys

import lightning as L
import optuna

from ablate.config import load_config
from ablate.study import PRUNED_EXIT, STORAGE_ENV, make_pruner, make_storage
from ablate.sweep import load_sweep


class PruningCallback(L.Callback):
    def __init__(self, trial: optuna.Trial, metric: str):
        self.trial, self.metric, self.pruned = trial, metric, False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or self.metric not in trainer.callback_metrics:
            return
        prune = False
        if trainer.is_global_zero:
            self.trial.report(float(trainer.callback_metrics[self.metric]), step=trainer.global_step)
            prune = self.trial.should_prune()
        if trainer.strategy.broadcast(prune):
            self.pruned = True
            trainer.should_stop = True


def main(argv: list[str]) -> int:
    cfg = load_config([argv[0]])
    callbacks = []
    if os.environ.get("ABLATE_TRIAL_ID"):
        sweep = load_sweep(os.environ["ABLATE_SWEEP_FILE"])
        storage = make_storage(os.environ[STORAGE_ENV], sweep)
        study = optuna.load_study(study_name=os.environ["ABLATE_STUDY_NAME"], storage=storage, pruner=make_pruner(sweep))
        trial = optuna.trial.Trial(study, int(os.environ["ABLATE_TRIAL_ID"]))
        callbacks.append(PruningCallback(trial, sweep.objective.metric))
    from ablate.train import train

    train(cfg, callbacks, resume="--resume" in argv[1:])
    return PRUNED_EXIT if any(getattr(c, "pruned", False) for c in callbacks) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
