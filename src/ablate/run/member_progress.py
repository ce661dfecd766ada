"""Each member's progress.json (format: ablate.run.progress_file), which a sweep's live view and `ablate status` read
for its trial: the member's own steps, target tokens and validations, not the group's; once its rules stop it, its
file says so ("finished", or "stopped" for a member that diverged, as an ordinary run's NaN guard ends it) and its
step count stays where it stopped while the group trains on."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ablate.run.member_stops import DIVERGED
from ablate.run.progress import ProgressFile
from ablate.run.progress_file import read_progress

if TYPE_CHECKING:
    from ablate.run.member_runs import MemberRuns


class MemberProgress(ProgressFile):
    of_the_trainer = False  # the bar showed member 0's step, ETA and validation, frozen once member 0 stopped

    def __init__(self, out: str | Path, k: int, runs: MemberRuns):
        super().__init__(out, may_stop_sooner=True)
        self.k, self.runs = k, runs

    def _stopped(self, trainer) -> bool:
        """Whether member k stopped; the first time, the file says how (and it is kept fresh after: a reader takes a
        file that is not rewritten for long for a hung run)."""
        reason = self.runs.stops.reason[self.k]
        if reason is None:
            return False
        if self.state["phase"] not in ("finished", "stopped"):
            self.state.update(phase="stopped" if reason == DIVERGED else "finished", eta_s=None if reason == DIVERGED else 0.0)
            self._write(trainer, force=True)
        return True

    def on_train_start(self, trainer, pl_module) -> None:
        if self.runs.stops.reason[self.k] is None:
            return super().on_train_start(trainer, pl_module)
        # A resumed group: a member stopped before keeps the file it left (its step, its last validation).
        saved = read_progress(self.out) or {}
        self.state.update({key: saved[key] for key in self.state if key in saved})
        self._stopped(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._stopped(trainer):
            return self._write(trainer)  # as often as a training member's: only `updated` moves
        own = {"tgt_tokens": batch["member_tgt_tokens"][self.k]} if isinstance(batch, dict) and "member_tgt_tokens" in batch else batch
        super().on_train_batch_end(trainer, pl_module, outputs, own, batch_idx)

    def on_validation_start(self, trainer, pl_module) -> None:
        if not self._stopped(trainer):
            super().on_validation_start(trainer, pl_module)

    def _validation(self, trainer, pl_module) -> dict:
        return pl_module.member_metrics[self.k] if self.k < len(pl_module.member_metrics) else {}

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or self._val_started is None:  # not a validation this member took part in
            return
        super().on_validation_end(trainer, pl_module)
        self._stopped(trainer)  # stopped by this validation: the file says so

    def on_train_end(self, trainer, pl_module) -> None:
        if not self._stopped(trainer):
            super().on_train_end(trainer, pl_module)
