"""The Trainer `ablate train` fits with: checkpoints (best, the last K, last.ckpt), loggers (CSV, W&B where
configured), the speed, stop-rule, preemption and progress callbacks, written atomically; one builder, so what
benchmarks/step_overhead.py times is this very Trainer."""

from __future__ import annotations

import logging
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.accelerators import AcceleratorRegistry
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.strategies import StrategyRegistry

from ablate.config import ExperimentConfig
from ablate.files.signals import raises_on_sigterm
from ablate.run.callbacks import CALLBACKS, Preemption, resume_command
from ablate.run.checkpoint_io import AtomicCheckpointIO
from ablate.run.exits import INTERRUPTED_EXIT
from ablate.run.loggers import make_csv_logger, make_wandb_logger
from ablate.run.progress import PlainProgress, ProgressBar, ProgressFile
from ablate.run.provenance import run_provenance
from ablate.run.quiet import quiet_dependencies
from ablate.run.stopping import StopRules
from ablate.training.device import trains_on_cpu
from ablate.training.flops import train_flops
from ablate.training.host_memory import keep_freed_memory
from ablate.training.lightning_internals import StepCheckpoint
from ablate.training.metrics import SpeedCallback
from ablate.training.module import TranslationModule
from ablate.training.precision import Precision
from ablate.training.rng import RngState

log = logging.getLogger(__name__)


def prepare_process(cfg: ExperimentConfig) -> Precision:
    """What a training process sets before it builds anything, for a run and a member group alike: freed host memory
    kept for the next step (no page faults), torch's threads, the matmul precision and every seed. The precision."""
    _check_devices(cfg.train)
    _check_half_precision_has_a_gpu(cfg.train)
    keep_freed_memory()
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    precision = Precision.of(cfg.train)
    precision.set_matmul()
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    return precision


def _check_devices(t) -> None:
    """train.accelerator and train.strategy as Lightning reads them, refused here, before anything is written: Lightning
    refused them only once the data was read, `gpu` on a machine without one as a traceback, the folder left a run."""
    names = {"auto", "gpu", *AcceleratorRegistry.available_accelerators()}  # the accelerator exactly, as Lightning reads it
    if t.accelerator not in names:
        raise ValueError(f"train.accelerator={t.accelerator!r} is none of {', '.join(sorted(names))}")
    kinds = ("cuda", "mps") if t.accelerator == "gpu" else () if t.accelerator == "auto" else (t.accelerator,)  # gpu: either
    if kinds and not any(AcceleratorRegistry[k]["accelerator"].is_available() for k in kinds):
        raise ValueError(f"train.accelerator={t.accelerator}: this machine has no {' or '.join(kinds)} device; use train.accelerator=auto")
    if (strategy := t.strategy.lower()) != "auto" and strategy not in StrategyRegistry.available_strategies():  # any case, as Lightning
        raise ValueError(f"train.strategy={t.strategy!r} is not a strategy Lightning knows (auto, ddp, ddp_spawn, fsdp, deepspeed, ...)")


def _check_half_precision_has_a_gpu(t) -> None:
    """On a CPU Lightning trains a 16-mixed run in bf16-mixed (a warning in the log), while ablate would decode it and
    count its MFU in fp16, and its config would say 16-mixed: refused instead, before anything is written."""
    if t.precision == "16-mixed" and trains_on_cpu(t):
        raise ValueError(
            f"train.precision=16-mixed needs a GPU, and this run trains on the CPU (train.accelerator={t.accelerator}"
            f"{', and no GPU here' if t.accelerator == 'auto' else ''}); use train.precision=bf16-mixed"
        )


def make_trainer(cfg: ExperimentConfig, out: Path, loggers: list, extra_callbacks: list) -> L.Trainer:
    """The Trainer of a run: its devices and strategy, accumulation, Lightning's clipping, and its checkpoints."""
    t = cfg.train
    monitor, mode = t.best_by
    checkpoints = [
        ModelCheckpoint(dirpath=out / "checkpoints", filename="best", monitor=monitor, mode=mode, save_top_k=1,
                        auto_insert_metric_name=False, enable_version_counter=False),
        # The K most recent validation points, for `ablate average` (the paper averaged the last 5).
        StepCheckpoint(dirpath=out / "checkpoints", filename="step={step}", monitor="step", mode="max", save_top_k=t.keep_last,
                       save_last=True, auto_insert_metric_name=False, enable_version_counter=False),
    ]  # fmt: skip
    may_stop_sooner = bool(t.converge_window or t.early_stop_metric or t.max_time or t.max_flops)
    return _trainer(cfg, out, loggers, [*checkpoints, *extra_callbacks], may_stop_sooner, t.accumulate,
                    devices=t.devices, strategy=t.strategy, gradient_clip_val=t.clip_grad or None,
                    enable_checkpointing=True)  # fmt: skip


def make_group_trainer(cfg: ExperimentConfig, out: Path, loggers: list, extra_callbacks: list) -> L.Trainer:
    """The Trainer of a member group (ablate.run.members): one device, no accumulation, clipping per member in
    MemberAdam, and each member's checkpoints written by its MemberRuns; each member may stop sooner than the group."""
    return _trainer(cfg, out, loggers, extra_callbacks, may_stop_sooner=True, accumulate=1, devices=1, strategy="auto",
                    gradient_clip_val=None, enable_checkpointing=False)  # fmt: skip


def _trainer(
    cfg: ExperimentConfig, out: Path, loggers: list, extra_callbacks: list, may_stop_sooner: bool, accumulate: int, **shape
) -> L.Trainer:
    """What a run's and a group's Trainers share; `shape`, the Trainer's arguments where they differ (devices,
    clipping, checkpoints)."""
    t = cfg.train
    quiet_dependencies(out)
    callbacks = [
        RngState(),  # the generators in every checkpoint, restored at the first resumed batch
        *(callback() for callback in CALLBACKS.values()),  # the researcher's own, from plugins (a group's see MemberModule)
        *extra_callbacks,
        # progress.json, read by a sweep's live view and `ablate status`; its ETA (to max_steps) is a bound when a rule may stop sooner
        ProgressFile(out, may_stop_sooner=may_stop_sooner),
    ]
    bar = cfg.logging.progress and sys.stdout.isatty()
    if cfg.logging.progress:  # step/total, tokens/s, ETA, latest val loss/BLEU: a bar on a terminal, else plain lines
        callbacks.append(ProgressBar() if bar else PlainProgress())
    every = t.val_every_steps
    return L.Trainer(
        max_steps=t.max_steps,
        max_epochs=t.max_epochs or -1,
        accelerator=t.accelerator,
        precision=Precision.of(t).name,
        accumulate_grad_batches=accumulate,
        val_check_interval=every * accumulate if every else 1.0,
        check_val_every_n_epoch=None if every else 1,
        log_every_n_steps=t.log_every_steps,
        logger=loggers,
        callbacks=callbacks,
        default_root_dir=out,
        use_distributed_sampler=False,  # the token-bucket sampler shards by rank itself
        enable_progress_bar=bar,
        num_sanity_val_steps=1,
        deterministic=t.deterministic,
        enable_model_summary=False,
        plugins=[AtomicCheckpointIO()],
        **shape,
    )


def judge_trainer(cfg: ExperimentConfig) -> L.Trainer:
    """A bare Trainer that validates and scores one set of weights (a member's at its end): no loggers, callbacks or
    checkpoints of its own."""
    return L.Trainer(
        accelerator=cfg.train.accelerator,
        devices=1,
        precision=Precision.of(cfg.train).name,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def fit_or_exit(trainer: L.Trainer, module: L.LightningModule, dm, ckpt_path: Path | None, preemption: Preemption) -> None:
    """trainer.fit, from `ckpt_path` when resuming; a run stopped by a signal (saved at a step boundary by
    `preemption`) exits with its code (75, or 130 for Ctrl-C) instead of going on to its summary."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    # SIGTERM is Preemption's from here: noted, it stops the run at its first step boundary, saved. Lightning, from its
    # setup on, calls this handler from its own; `ablate train`'s, which raises while the data loads, would stop the run
    # between step boundaries. A caller's own handler is put back after.
    previous = signal.signal(signal.SIGTERM, preemption.note)
    try:
        trainer.fit(module, datamodule=dm, ckpt_path=str(ckpt_path) if ckpt_path else None, weights_only=True)
    except SIGTERMException:
        raise SystemExit(preemption.exit_code) from None
    except SystemExit as e:
        if e.code != 1 or not isinstance(e.__context__, KeyboardInterrupt):
            raise
        # Lightning's own shutdown on a Ctrl-C it caught (a second one, which aborts at once, or one before training
        # began) exits 1, as a failure would: exit as a Ctrl-C, saying what is saved.
        saved = any((preemption.out / "checkpoints").glob("*.ckpt"))
        where = f"continue from the last checkpoint in {preemption.out / 'checkpoints'}: {resume_command()}"
        # A first Ctrl-C reaches Lightning only before training starts (Preemption notes it from then on): no "at once"
        when = "at once, saving nothing new" if preemption.signal == signal.SIGINT else "before training started"
        log.warning("stopped by Ctrl-C %s; %s", when, where if saved else "nothing was saved yet: the same command starts it again")
        raise SystemExit(INTERRUPTED_EXIT) from None
    finally:
        keep = previous is None or raises_on_sigterm(previous)  # None: a handler set outside Python
        signal.signal(signal.SIGTERM, signal.SIG_DFL if keep else previous)


@dataclass
class TrainerParts:
    """The pieces of `build_trainer`'s Trainer that `_train` reads after fitting (speed, stop reason, exit code, the
    run's fixed facts) or must close (W&B)."""

    speed: SpeedCallback
    stop: StopRules
    preemption: Preemption
    extra: dict
    wandb_logger: WandbLogger | None


def build_trainer(
    cfg: ExperimentConfig, out: Path, vocab: int, module: TranslationModule, attempt: int, callbacks: list
) -> tuple[L.Trainer, TrainerParts]:
    """The Trainer `ablate train` fits with: its loggers (CSV, W&B where configured), speed, stop-rule and preemption
    callbacks, then `callbacks`. One function so benchmarks/step_overhead.py times this very Trainer."""
    extra = {"params/total": module.params["total"], **run_provenance(), "vocab_size": vocab}
    precision = Precision.of(cfg.train)
    speed = SpeedCallback(cfg.train.log_every_steps, lambda batch: train_flops(cfg.model, vocab, batch), cfg.train.peak_tflops, precision)
    wandb_logger = make_wandb_logger(cfg, out, extra)
    csv_logger = make_csv_logger(out, attempt)
    loggers = [csv_logger] + ([wandb_logger] if wandb_logger else [])
    preemption = Preemption(out)
    stop = StopRules(cfg.train, speed.flops)  # before Preemption: a preemption save holds the step's FLOPs
    trainer = make_trainer(cfg, out, loggers, [speed, stop, preemption, *callbacks])
    return trainer, TrainerParts(speed, stop, preemption, extra, wandb_logger)
