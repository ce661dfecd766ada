"""End-to-end fixtures: one tiny trained run shared by the CLI tests (training is the slow part)."""

from __future__ import annotations

import pytest
import torch
from helpers import tiny_experiment

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """A 1+1 layer model trained for 120 steps on the synthetic corpus, W&B offline."""
    from ablate.run.train import train

    tmp = tmp_path_factory.mktemp("trained")
    cfg = tiny_experiment(
        tmp,
        train={"max_steps": 120, "val_every_steps": 40, "warmup": 40, "lr_scale": 1.0, "keep_last": 2},
        logging={"wandb": True, "mode": "offline", "group": "tests", "name": "tiny", "tags": ["unit", "e2e"]},
    )
    summary = train(cfg)
    import wandb

    wandb.teardown()  # finish() returns before W&B's service has written the run's file; the tests read it
    return cfg, summary, tmp
