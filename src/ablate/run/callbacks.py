"""Callbacks that make a run survive its machine (preemption signals: save at a step boundary, exit 75), and the
registry of a researcher's own: a plugin that registers a Lightning callback in CALLBACKS has it in every run that
imports the plugin (docs/variants.md)."""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lightning as L

from ablate.files.atomic import DiskFull
from ablate.registry import Registry
from ablate.run.exits import STOP_SIGNALS, SWEEP_FILE_ENV, stop_exit
from ablate.training.lightning_internals import stop_as_on_sigterm

log = logging.getLogger(__name__)

# name -> Lightning callback class, built with no arguments for every run: `@register(CALLBACKS, "my-callback")`.
CALLBACKS = Registry(L.Callback)


def fit_validation(trainer: L.Trainer) -> bool:
    """Whether the validation now ending is one of training's: not Lightning's sanity check, nor the final weights'
    validation after training (`trainer.validate`, off the validation grid), which no stop rule or pruner judges."""
    from lightning.pytorch.trainer.states import TrainerFn

    return not trainer.sanity_checking and trainer.state.fn == TrainerFn.FITTING


def mid_accumulation(trainer: L.Trainer) -> bool:
    """Whether the batch that just ended left gradients waiting for the next ones (no optimizer step yet): its
    count in the epoch is not a multiple of the accumulation, and it is not the epoch's last batch."""
    progress = trainer.fit_loop.epoch_loop.batch_progress
    return progress.current.ready % trainer.accumulate_grad_batches != 0 and not progress.is_last_batch


class Preemption(L.Callback):
    """SIGTERM or SIGUSR1 (cluster preemption): save last.ckpt at the next optimizer step, exit with PREEMPTED_EXIT.
    SIGINT (Ctrl-C) does the same and exits with INTERRUPTED_EXIT; a second Ctrl-C aborts at once, saving nothing.

    The handler only notes the signal. The checkpoint is taken at the end of the first training batch after it
    that completes an optimizer step: in the middle of gradient accumulation the partial gradients belong to no
    checkpoint, and a run resumed there would take its next step on part of a batch. At a step boundary model,
    optimizer, schedule and data position agree (Lightning's own mid-epoch checkpoint point), so `--resume`
    continues exactly. Under DDP the ranks agree on stopping at every step boundary (an all-reduce of one
    flag), so a signal delivered to any one rank stops all of them at the same step; Lightning's own handler
    broadcasts from rank 0 inside the signal handler and misses a signal sent to another rank. A signal during
    validation takes effect after it. Inside a SLURM job SIGUSR1 (`--signal=USR1@90`) also requeues the job
    (`scontrol requeue`), and a job script using `--auto-resume` picks up where it stopped.
    """

    def __init__(self, out: Path):
        self.out, self.signal, self.saved, self._previous = out, None, None, {}

    def note(self, signum, frame) -> None:
        """The handler: notes the signal, acted on at the next step boundary in training (SIGTERM's from the fit's
        start, ablate.run.trainer.fit_or_exit, so one during the fit's setup stops the run at its first step, saved)."""
        if signum == signal.SIGINT and self.signal == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: the user wants out now
        if self.signal is None or signum == signal.SIGINT:  # a Ctrl-C wins: the run stops because its user said so
            self.signal = signum

    @property
    def exit_code(self) -> int:
        return stop_exit(self.signal)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Not on_fit_start: Lightning installs its own SIGTERM handler after that hook, and it would stop the run
        # at once, between step boundaries. (A signal before training starts is Lightning's: nothing to save yet.)
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self.note)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int) -> None:
        if self.saved is not None or mid_accumulation(trainer):
            return
        stop = self.signal is not None
        if trainer.world_size > 1:
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            trainer.save_checkpoint(self.out / "checkpoints" / "last.ckpt", weights_only=False)  # full state: resumable
            self.saved = trainer.global_step
            if trainer.is_global_zero:
                why = "Ctrl-C" if self.signal == signal.SIGINT else "a preemption signal"
                log.warning(
                    "stopped by %s at step %d; saved %s; continue with: %s",
                    why,
                    trainer.global_step,
                    self.out / "checkpoints" / "last.ckpt",
                    resume_command(),
                )
            stop_as_on_sigterm(trainer)  # SIGTERMException once this batch's bookkeeping (logging) is done

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        from lightning.pytorch.utilities.exceptions import SIGTERMException

        fitting = trainer.state.fn == "fit"  # a validation after training (run_end) says its own line
        if isinstance(exception, SIGTERMException) and self.saved is None and fitting and trainer.is_global_zero:
            log.warning("stopped by a signal before training started; nothing new to save in %s", self.out / "checkpoints")
        if self.saved is not None and self.signal == signal.SIGUSR1 and os.environ.get("SLURM_JOB_ID") and trainer.is_global_zero:
            subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]], check=False)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        for signum, previous in self._previous.items():  # after fit a signal acts as it did before
            if signal.getsignal(signum) == self.note:
                signal.signal(signum, previous)


class _Stopped(BaseException):
    """A signal during a run's end (run_end): a BaseException, so no `except Exception` on the way out eats it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextmanager
def run_end(out: Path, summaries: list[Path] | None = None) -> Iterator[None]:
    """A run's end after training (the final weights' validation, the reported weights, the evaluation record, the
    summary) under the signals Preemption handles in training. Training is saved by then, so a signal exits 75 (130
    for Ctrl-C) saying to resume, which runs the end again; without this, Lightning's SIGTERM in a validation exits 0
    with no summary, and anywhere else the signal kills the process with no word. `summaries`: the files the end writes
    (OUT/summary.json; a group's, each member's), which a resume has set aside: once each is there, a signal came while
    the results went to W&B, and is said so rather than as an end not written."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    def stop(signum, frame) -> None:
        raise _Stopped(signum)

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield
    except (_Stopped, SIGTERMException) as e:
        signum = e.signum if isinstance(e, _Stopped) else signal.SIGTERM
        written = summaries or [out / "summary.json"]
        what = (
            f"after its results were written ({', '.join(map(str, written))}), while they went to its W&B run, which "
            "may lack them; they are sent again by"
            if all(path.is_file() for path in written)
            else f"after training, before the end of {out} (final validation, reported weights, evaluation record, "
            "summary) was written; training is saved: continue with:"
        )
        log.warning("stopped by %s %s %s", "Ctrl-C" if signum == signal.SIGINT else "a preemption signal", what, resume_command())
        raise SystemExit(stop_exit(signum)) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def resume_command() -> str:
    """The command that continues this run: the user's own `ablate train ...` with --resume (or a generic form); in a
    sweep's trial, its sweep run again, which continues the trial from its checkpoint in the same run directory."""
    if sweep_file := os.environ.get(SWEEP_FILE_ENV):
        return f"{shlex.join(['ablate', 'sweep', sweep_file])} (the sweep this trial is in, with the flags it ran with)"
    args = sys.argv[1:]
    if not args or args[0] != "train":
        return "ablate train CONFIG [overrides] --resume"
    # --move-aside moved the earlier run once; with --resume it would be refused (one or the other)
    return shlex.join(["ablate", *[a for a in args if a not in ("--resume", "--auto-resume", "--force", "--move-aside")], "--resume"])


def disk_full_advice(e: BaseException, out: Path) -> DiskFull | None:
    """A full disk mid-run, said with how to go on where a checkpoint holds the training so far (as a signal's stop
    says): the error alone named the file, and the run looked lost."""
    if not isinstance(e, DiskFull) or not any((out / "checkpoints").glob("*.ckpt")):
        return None
    advised = DiskFull(f"{e}; training is saved up to its last checkpoint: free space, then continue with: {resume_command()}")
    advised.errno = e.errno
    return advised
