"""Each member of a group as an ordinary run: its own run directory receives what `ablate train` writes there
(metrics.csv, checkpoints best / step=N / last in the format `evaluate`, `translate` and `average` load, a W&B run),
at the group's logging steps and validations. The group's own checkpoint, which resumes every member, is
GroupCheckpoint's. Members that stopped (ablate.run.member_stops) write nothing more.
"""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L

from ablate import plugins
from ablate.config import ExperimentConfig, to_dict
from ablate.run.callbacks import fit_validation
from ablate.run.loggers import finish_wandb, make_csv_logger, make_wandb_logger
from ablate.run.member_stops import DIVERGED, MemberStops
from ablate.training.checkpoint import save_atomic


class MemberRuns(L.Callback):
    def __init__(self, configs: list[ExperimentConfig], outs: list[Path], group: Path, vocab: int, proto: bytes, attempt: int, extra: dict):
        self.configs, self.outs, self.group, self.vocab, self.proto, self.extra = configs, outs, group, vocab, proto, extra
        t = configs[0].train
        self.monitor, mode = t.best_by
        self.sign = -1.0 if mode == "max" else 1.0  # lower is better
        self.stops = MemberStops(t, len(configs))
        self.csv = [make_csv_logger(out, attempt) for out in outs]
        self.wandb = [make_wandb_logger(cfg, out, {**extra, "members/group": str(group)}, several=True) for cfg, out in zip(configs, outs)]
        self.best: list[float | None] = [None] * len(configs)
        self.last: list[dict[str, float]] = [{} for _ in configs]  # each member's metrics of its last validation
        self.validated_step: list[int | None] = [None] * len(configs)
        self._padded = [0.0, 0]  # sum of the steps' padded shares, steps

    @property
    def padded(self) -> float:
        """The mean share of a step's positions that were padding (what batching members together cost)."""
        return self._padded[0] / max(self._padded[1], 1)

    def _loggers(self, k: int) -> list:
        return [self.csv[k]] + ([self.wandb[k]] if self.wandb[k] is not None else [])

    def write(self, k: int, metrics: dict[str, float], step: int) -> None:
        """A row of member k's metrics, in its metrics.csv and W&B run."""
        for logger in self._loggers(k):
            logger.log_metrics(metrics, step=step)
            logger.save()

    def on_train_start(self, trainer, pl_module) -> None:
        # A resumed group: the members that had stopped stay frozen (their reasons came back with this callback's state).
        for k, reason in enumerate(self.stops.reason):
            if reason is not None:
                pl_module.optimizer.freeze(k)
        self._stop_if_done(trainer)  # all of them stopped (killed while their ends were written): no step more

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        self._padded[0] += batch["padded"]
        self._padded[1] += 1
        losses, pl_module.train_losses = pl_module.train_losses, None
        if losses is None:
            return
        rates = pl_module.optimizer.last_rates()
        for k, loss in enumerate(losses.tolist()):
            if self.stops.reason[k] is not None:
                continue
            if not math.isfinite(loss):  # the NaN guard of one run, for this member alone: the others train on
                self.stops.diverge(k, f"train/loss is {loss} at step {trainer.global_step}; the last checkpoint is the last good one")
                pl_module.optimizer.freeze(k)
                continue
            row = {
                "epoch": trainer.current_epoch,
                "train/loss": loss,
                "train/ppl": float(pl_module.train_ppl[k]),
                "train/lr": float(rates[k]),
            }
            self.write(k, row, pl_module.train_step)  # the step Lightning's loggers give a run's row
        self._stop_if_done(trainer)

    def on_validation_end(self, trainer, pl_module) -> None:
        if fit_validation(trainer):
            self.record(trainer, pl_module)

    def record(self, trainer, pl_module, judge: bool = True) -> None:
        """Write each training member's last validation: its metrics row and checkpoints; then stop members whose
        rule says so. Without `judge` (the final weights' validation after training, as ablate.run.members makes
        it), no rule judges, as none judges a run's own final validation; a member validated at this step is done. That
        validation saves last.ckpt alone, as a run's after its fit: no step=N.ckpt to average in, none pruned, no best."""
        step = trainer.global_step
        for k, metrics in enumerate(pl_module.member_metrics):
            if self.stops.reason[k] is not None or (not judge and self.validated_step[k] == step):
                continue
            self.last[k], self.validated_step[k] = dict(metrics), step
            reason = self.stops.update(k, metrics, step) if judge else None
            # The step Lightning gives a run's validation row: one behind during fit, the step itself in trainer.validate
            self.write(k, {"epoch": trainer.current_epoch, **metrics}, step - 1 if judge else step)
            if reason != DIVERGED:
                self._save(k, trainer, pl_module, metrics, final=not judge)
            if reason is not None:
                pl_module.optimizer.freeze(k)
        self._stop_if_done(trainer)

    def stop(self, k: int, reason: str, trainer, pl_module) -> None:
        """Stop member k for a reason of the caller's (a sweep's pruner: "pruned"), as its own rules would."""
        self.stops.stop(k, reason)
        pl_module.optimizer.freeze(k)
        self._stop_if_done(trainer)

    def _stop_if_done(self, trainer) -> None:
        if self.stops.all_stopped:
            trainer.should_stop = True

    def checkpoint(self, k: int, trainer, pl_module) -> dict:
        """Member k's checkpoint in the format of an ordinary run's (what ablate.training.checkpoint reads)."""
        weights = pl_module.member_weights(k)
        return {
            "state_dict": {f"model.{name}": t.cpu() for name, t in weights.items()},
            "hyper_parameters": {"config": to_dict(self.configs[k]), "vocab_size": self.vocab},
            "tokenizer_model": self.proto,
            "run_id": pl_module.run_id,  # the group's: with the member's index, which run this is
            plugins.PLUGIN_HASHES: plugins.contents(self.configs[k].plugins),
            "params": dict(pl_module.params),
            "global_step": int(pl_module.optimizer.steps()[k]),
            "epoch": trainer.current_epoch,
            "pytorch-lightning_version": L.__version__,
            "optimizer_states": [pl_module.member_optimizer(k)],
            "member_of": {"group": str(self.group), "member": k, "members": len(self.configs)},
        }

    def _save(self, k: int, trainer, pl_module, metrics: dict[str, float], final: bool = False) -> None:
        """Member k's checkpoints at a validation; `final` (the final weights' after training): last.ckpt alone."""
        folder = self.outs[k] / "checkpoints"
        folder.mkdir(parents=True, exist_ok=True)  # a group that ended before its first validation has made none yet
        ckpt = self.checkpoint(k, trainer, pl_module)
        for name in ["last.ckpt"] if final else [f"step={trainer.global_step}.ckpt", "last.ckpt"]:
            save_atomic(ckpt, folder / name)
        if final:
            return
        kept = sorted(folder.glob("step=*.ckpt"), key=lambda p: int(p.stem.split("=")[1]))
        for old in kept[: -self.configs[k].train.keep_last] if self.configs[k].train.keep_last else kept:
            old.unlink()
        value = metrics.get(self.monitor)
        if value is not None and math.isfinite(value) and (self.best[k] is None or self.sign * value < self.sign * self.best[k]):
            self.best[k] = value
            save_atomic(ckpt, folder / "best.ckpt")

    def finish(self) -> None:
        for logger in self.wandb:
            finish_wandb(logger)

    def state_dict(self) -> dict:
        return {"stops": self.stops.state_dict(), "best": self.best, "last": self.last, "validated_step": self.validated_step,
                "padded": list(self._padded)}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.stops.load_state_dict(state["stops"])
        self.best, self.last, self.validated_step = list(state["best"]), list(state["last"]), list(state["validated_step"])
        self._padded = list(state["padded"])


class GroupCheckpoint(L.Callback):
    """The group's own checkpoint (every member's weights, moments and stop state, every callback's state), which
    `--resume` continues from, saved at each validation. Last among the group's callbacks, so it holds what all of
    them made of this validation: a member a pruner or its rules stopped here is still stopped after a kill."""

    def __init__(self, group: Path):
        self.path = group / "checkpoints" / "last.ckpt"

    def on_validation_end(self, trainer, pl_module) -> None:
        if fit_validation(trainer):
            trainer.save_checkpoint(self.path, weights_only=False)
