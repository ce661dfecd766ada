"""The trainer's checkpoint writer; beside the run, not in ablate.training.checkpoint, which must not import Lightning."""

from __future__ import annotations

from pathlib import Path

from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from ablate.training.checkpoint import save_atomic


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, made atomic: write a temp file beside the target, fsync, rename over it.

    Lightning writes the target in place, so a kill mid-save (preemption, OOM killer) would leave a truncated
    last.ckpt where a good one was; with a rename the target is always the old or the new complete file.
    """

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        save_atomic(checkpoint, path)
