"""The trainer's checkpoint writer creates its folder and leaves no temp file behind."""

from __future__ import annotations

import torch

from ablate.run.checkpoint_io import AtomicCheckpointIO
from ablate.training.checkpoint import load_checkpoint


def test_atomic_checkpoint_io_creates_the_folder_and_saves_atomically(tmp_path):
    path = tmp_path / "run" / "checkpoints" / "step=5.ckpt"
    AtomicCheckpointIO().save_checkpoint({"state_dict": {"w": torch.ones(2)}, "hyper_parameters": {}, "global_step": 5}, path)
    assert load_checkpoint(path)["global_step"] == 5
    assert [p.name for p in path.parent.iterdir()] == ["step=5.ckpt"]  # no temp file left
