"""Pieces of a run's summary computed without training (the runs themselves: tests/integration/test_train.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from ablate.run.train import epochs_trained


@pytest.mark.parametrize(
    ("batches", "accumulate", "steps", "epoch", "expected"),
    [
        (10, 1, 11, 2, 1.1),  # one step into the second epoch, which Lightning already counts as whole
        (10, 1, 20, 2, 2),
        (10, 4, 7, 3, 2.33),  # 3 steps an epoch: 4 + 4 + the last 2 batches
        (10, 1, 5, 1, 0.5),
        (math.inf, 1, 5, 1, 1),  # an iterable without a length: Lightning's count is all there is
    ],
)
def test_epochs_trained_counts_a_partial_epoch_as_its_fraction(batches, accumulate, steps, epoch, expected):
    trainer = SimpleNamespace(num_training_batches=batches, global_step=steps, current_epoch=epoch)
    assert epochs_trained(trainer, accumulate) == expected
