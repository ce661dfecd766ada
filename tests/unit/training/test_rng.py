"""The generators in a checkpoint (ablate.training.rng): every one training draws from survives a weights-only load,
and the RngState callback restores them right before the first resumed batch, from the writer's rank when the rank
count changed."""

from __future__ import annotations

import logging
import random

import numpy as np
import torch

from ablate.training.rng import RngState, rng_states, set_rng_states


class StubTrainer:
    def __init__(self, world_size: int = 1):
        self.world_size, self.global_rank = world_size, 0


def draws() -> tuple:
    """A few numbers from each generator training draws from, Gaussian ones included (they cache a second value)."""
    return torch.rand(3).tolist(), np.random.rand(2).tolist(), np.random.randn(), random.random(), random.gauss(0, 1)


def test_rng_states_survive_a_weights_only_load_and_restore_every_generator(tmp_path):
    random.gauss(0, 1)  # leaves a cached gauss value in Python's state
    np.random.seed(5)
    np.random.randn()  # and numpy's
    states = rng_states()
    torch.save(states, tmp_path / "rng.pt")
    expected = draws()
    assert draws() != expected  # the generators moved on
    set_rng_states(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert draws() == expected


def test_the_callback_saves_the_generators_and_restores_them_at_the_first_resumed_batch_only():
    callback, trainer = RngState(), StubTrainer()
    checkpoint = {}
    callback.on_save_checkpoint(trainer, None, checkpoint)
    assert torch.equal(checkpoint["rng"]["torch"], torch.get_rng_state()) and "rng_per_rank" not in checkpoint
    expected = draws()
    callback.on_load_checkpoint(trainer, None, checkpoint)
    draws()  # what runs between loading and the first batch (data iterators) draws too
    callback.on_train_batch_start(trainer, None, None, 0)
    assert draws() == expected
    callback.on_train_batch_start(trainer, None, None, 1)  # later batches leave the generators alone
    assert draws() != expected


def test_a_checkpoint_from_a_different_rank_count_warns_and_uses_the_writers_states(caplog):
    callback = RngState()
    own = rng_states()
    expected = draws()
    other = rng_states()
    rng_log = logging.getLogger("ablate.training.rng")
    rng_log.addHandler(caplog.handler)  # directly: the CLI may have stopped "ablate" propagating to the root
    try:
        callback.on_load_checkpoint(StubTrainer(world_size=1), None, {"rng": own, "rng_per_rank": [other, other]})
    finally:
        rng_log.removeHandler(caplog.handler)
    assert "written by 2 ranks and resumes on 1" in caplog.text
    callback.on_train_batch_start(None, None, None, 0)
    assert draws() == expected
