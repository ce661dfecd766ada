"""End-to-end fixtures: one tiny trained run shared by the CLI tests (training is the slow part), and the sweep\nenvironment the sweep tests share."""

from __future__ import annotations

import pytest
import torch
from helpers import sweep_writer, tiny_experiment

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


@pytest.fixture
def sweep_env(tmp_path, monkeypatch):
    """A base experiment on a synthetic corpus, short heartbeats, and a writer for sweep files."""
    monkeypatch.setenv("ABLATE_SWEEP_HEARTBEAT", "2")  # a stale trial in 8 s: 4 s was a loaded CI machine's stall
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    write = sweep_writer(tmp_path, {"max_steps": 20, "val_every_steps": 10, "num_threads": 1, "val_max_sentences": 10}, name="s")
    return tmp_path, write
