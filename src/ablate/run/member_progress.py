"""Each member's progress.json (format: ablate.run.progress_file), which a sweep's live view and `ablate status` read
for its trial: the member's own steps, target tokens and validations, not the group's; once its rules stop it, its
file says so ("finished", or "stopped" for a member that diverged, as an ordinary run's NaN guard ends it) and its
step count stays where it stopped while the group trains on."""

from __future__ import annotations

from pathlib import Path

from ablate.run.member_stops import DIVERGED
from ablate.run.progress import VAL_METRICS, ProgressFile


class MemberProgress(ProgressFile):
    def __init__(self, out: str | Path, k: int, runs):
        super().__init__(out, may_stop_sooner=True)
        self.k, self.runs = k, runs

    def _stopped(self, trainer) -> bool:
        reason = self.runs.stops.reason[self.k]
        if reason is None:
            return False
        if self.state["phase"] not in ("finished", "stopped"):
            self.state.update(phase="stopped" if reason == DIVERGED else "finished", eta_s=None if reason == DIVERGED else 0.0)
            self._write(trainer, force=True)
        return True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not self._stopped(trainer):
            own = {"tgt_tokens": batch["member_tgt_tokens"][self.k]} if isinstance(batch, dict) and "member_tgt_tokens" in batch else batch
            super().on_train_batch_end(trainer, pl_module, outputs, own, batch_idx)

    def on_validation_start(self, trainer, pl_module) -> None:
        if not self._stopped(trainer):
            super().on_validation_start(trainer, pl_module)

    def _validation(self, trainer, pl_module) -> dict[str, float]:
        metrics = pl_module.member_metrics[self.k] if self.k < len(pl_module.member_metrics) else {}
        return {key: round(float(metrics[key]), 4) for key in VAL_METRICS if key in metrics}

    def on_validation_end(self, trainer, pl_module) -> None:
        super().on_validation_end(trainer, pl_module)
        self._stopped(trainer)  # stopped by this validation: the file says so

    def on_train_end(self, trainer, pl_module) -> None:
        if not self._stopped(trainer):
            super().on_train_end(trainer, pl_module)
