"""The config a sweep trial trains with (the row's on the sweep's on the base, with the study's bookkeeping), and
whether a run directory's saved config differs from it (a continued trial whose row changed starts over)."""

from __future__ import annotations

from pathlib import Path

import optuna

from ablate.run import changes_from_saved_config
from ablate.sweep.plan import TrialSpec
from ablate.sweep.spec import Sweep


def trial_config(sweep: Sweep, trial: optuna.Trial, spec: TrialSpec, trial_dir: Path, members: dict | None = None):
    """The trial's experiment config: the row's on the sweep's on the base, with the study's bookkeeping. Its W&B
    tags are the experiment's own (and the sweep's or row's `logging.tags`), then the row's (row, Table 3 group,
    seed), each once: row "base" is its own group."""
    extra = {
        "logging.group": sweep.name,
        "logging.name": spec.name,
        "logging.progress": False,
        "sweep.study": sweep.name,
        "sweep.row": spec.row,
        "sweep.trial": trial.number,
    }
    if sweep.basis is not None:
        extra["sweep.basis"] = sweep.basis.describe()
    if sweep.gpus_per_trial > 1:
        extra.update({"train.devices": sweep.gpus_per_trial, "train.strategy": "ddp"})
    extra.update(members or {"members.size": 1})  # a trial trained alone is an ordinary run, whatever its row asked
    cfg = sweep.config_for(spec.overrides, spec.seed, trial_dir, extra)
    cfg.logging.tags = list(dict.fromkeys([*cfg.logging.tags, *spec.tags]))
    return cfg


def config_changed(run_dir: Path, cfg) -> bool:
    """Whether `cfg` differs from the run's saved config (an unreadable one counts as differing)."""
    try:
        return bool(changes_from_saved_config(run_dir, cfg))
    except (OSError, ValueError, AttributeError):  # ValueError: ablate's ConfigError for a damaged config.yaml
        return True
