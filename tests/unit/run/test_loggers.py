"""A run's W&B logger, through a real offline run: what its file says about the run."""

from __future__ import annotations

import pytest
from helpers import tiny_experiment

from ablate.files.wandb_offline import find_runs, read_run
from ablate.run.loggers import make_wandb_logger

pytestmark = pytest.mark.slow  # a W&B offline run started and read back: seconds; the default set stays under a minute


def test_a_runs_tags_are_kept_once_and_a_sweep_trial_says_so_by_its_job_type(tmp_path):
    import wandb

    for name, study in (("alone", None), ("trial", "demo")):
        cfg = tiny_experiment(tmp_path / name, logging={"wandb": True, "mode": "offline", "tags": ["base", "paper", "base"]})
        cfg.sweep.study = study
        logger = make_wandb_logger(cfg, tmp_path / name, {})
        logger.experiment.finish()
    wandb.teardown()  # finish() returns before the service writes the run files
    runs = {read_run(p).path.parts[len(tmp_path.parts)]: read_run(p) for p in find_runs(tmp_path)}
    assert {k: (r.tags, r.job_type) for k, r in runs.items()} == {
        "alone": (["base", "paper"], "train"),
        "trial": (["base", "paper"], "sweep-trial"),
    }
