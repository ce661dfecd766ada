"""The random generators a run draws from (dropout masks, shuffling helpers) in its checkpoints, so a resumed run draws
what the uninterrupted one would have: a callback, so the LightningModules hold none of it (issue 39).

States are saved in types `torch.load(weights_only=True)` accepts. Under DDP every rank draws its own dropout masks,
so each rank's states are kept (`rng_per_rank`), not only those of the rank that writes.
"""

from __future__ import annotations

import logging
import random

import lightning as L
import numpy as np
import torch

log = logging.getLogger(__name__)


def rng_states() -> dict:
    """Every generator training draws from, in types torch.load(weights_only=True) accepts."""
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    states = {
        "torch": torch.get_rng_state(),
        "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": pos, "has_gauss": has_gauss, "gauss": gauss},
        "python": {"version": version, "internal": list(internal), "gauss": gauss_next},
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    n = states["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    p = states["python"]
    random.setstate((p["version"], tuple(p["internal"]), p["gauss"]))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


class RngState(L.Callback):
    """Saves the generators in every checkpoint (`rng`, and `rng_per_rank` under DDP) and restores them right before
    the first resumed batch: restoring at load time would be undone by what runs in between (creating data iterators
    draws from torch's generator)."""

    def __init__(self):
        self.pending: dict | None = None

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        checkpoint["rng"] = rng_states()
        if trainer.world_size > 1:
            per_rank: list = [None] * trainer.world_size
            torch.distributed.all_gather_object(per_rank, checkpoint["rng"])
            checkpoint["rng_per_rank"] = per_rank

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        per_rank = checkpoint.get("rng_per_rank") or []
        same_ranks = len(per_rank) == trainer.world_size
        if per_rank and not same_ranks:
            log.warning(
                "the checkpoint was written by %d ranks and resumes on %d: dropout masks will differ from the uninterrupted run",
                len(per_rank),
                trainer.world_size,
            )
        self.pending = per_rank[trainer.global_rank] if same_ranks else checkpoint.get("rng")

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if self.pending is not None:
            set_rng_states(self.pending)
            self.pending = None
