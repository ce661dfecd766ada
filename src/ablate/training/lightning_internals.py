"""The places ablate reaches into Lightning's private state, each because no public API does the job; kept here,
so the LightningModules and callbacks use public hooks only, and pinned by tests/unit/training/test_lightning_internals.py,
which fails when a Lightning release changes what these read or write.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint


def logs_this_step(module: L.LightningModule, batch_idx: int, every: int) -> bool:
    """Whether Lightning writes this batch's metrics to the loggers. Its own rule (log_every_n_steps, counted in
    optimizer steps across resumes and accumulation, and the last step) lives in its logger connector; a module that
    reads values on the host only when they are written must ask the same rule. Outside a Trainer (tests, benchmarks;
    `module.trainer` raises then, hence the private attribute): every `every`th batch."""
    trainer = module._trainer
    connector = getattr(trainer, "_logger_connector", None) if trainer is not None else None
    if connector is None:
        return batch_idx % every == 0
    return connector.should_update_logs


def pin_logging_counter(checkpoint: dict) -> None:
    """Lightning's count of batches that stepped, the step its loggers write rows at, is one ahead in checkpoints taken
    at an epoch's end or on SIGTERM compared with those taken by mid-epoch validation; pinned to the latter so a resumed
    run logs the steps it would have. The count is only in the loop's private state dict."""
    loops = checkpoint.get("loops", {}).get("fit_loop", {}).get("epoch_loop.state_dict")
    if loops is not None and "_batches_that_stepped" in loops:
        loops["_batches_that_stepped"] = max(checkpoint.get("global_step", 0) - 1, 0)


def stop_as_on_sigterm(trainer: L.Trainer) -> None:
    """Ask Lightning to stop as it does on SIGTERM (SIGTERMException once this batch's bookkeeping is done), after a
    callback saved at a step boundary. `trainer.received_sigterm` has no setter: the flag is its signal connector's."""
    trainer._signal_connector.received_sigterm = True


class StepCheckpoint(ModelCheckpoint):
    """A run's K most recent step checkpoints (train.keep_last), kept at K after a resume from one of them. Lightning
    never removes the file a Trainer resumed from (it might lie outside the run); a run resumed from step=N.ckpt,
    its last.ckpt behind or damaged, kept that file for good, one more each time, past keep_last and the disk check.
    Only the one inside this callback's own folder is released; the rule lives in a private method."""

    @property
    def state_key(self) -> str:
        """ModelCheckpoint's key: Lightning files a callback's state in a checkpoint under its class name, and a run
        saved before this class existed must find its top-k bookkeeping on resume."""
        return super().state_key.replace(type(self).__qualname__, ModelCheckpoint.__qualname__, 1)

    def _should_remove_checkpoint(self, trainer: L.Trainer, previous: str, current: str) -> bool:
        resumed = trainer.ckpt_path is not None and Path(previous).absolute() == Path(trainer.ckpt_path).absolute()
        if resumed and previous != current and self.dirpath is not None:
            return Path(self.dirpath).absolute() in Path(previous).absolute().parents
        return super()._should_remove_checkpoint(trainer, previous, current)
