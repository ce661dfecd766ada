"""`ablate train`: one complete training run, the unit of every ablation study.

The run directory (`out_dir`) receives config.yaml (the fully resolved config), checkpoints
(best by val/bleu, the last K, last.ckpt, with train.final_average avg.ckpt), metrics.csv, W&B offline files,
summary.json (scores, speed, FLOPs, why training stopped and the comparison basis), eval/valid.json and
fingerprint.json (the corpus files and tokenizer it trains on, which a resume checks).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ablate.config import ExperimentConfig, to_dict, to_yaml
from ablate.data.module import TranslationDataModule, available_splits
from ablate.evaluation.records import FINAL
from ablate.files import signals
from ablate.files.atomic import write_file
from ablate.run.callbacks import disk_full_advice, run_end
from ablate.run.evaluation import select_weights
from ablate.run.exits import stopped_by_signal
from ablate.run.fingerprint import record_fingerprint
from ablate.run.loggers import finish_wandb
from ablate.run.memory import check_fits
from ablate.run.results import complete_summary, publish
from ablate.run.resume_checks import prepare_resume, set_aside_results
from ablate.run.resume_point import resume_checkpoint
from ablate.run.run_lock import unlock_run_dir
from ablate.run.rundir import check_disk_space, claim_out_dir, empty_or_absent, remove_if_untouched, saved_config
from ablate.run.trainer import build_trainer, fit_or_exit, prepare_process
from ablate.training.first_pass import first_pass
from ablate.training.module import TranslationModule


def train(
    cfg: ExperimentConfig,
    callbacks: list = (),
    resume: bool = False,
    force: bool = False,
    aside: bool = False,
    accept_data_change: bool = False,
) -> dict:
    """Train, validate and checkpoint one model; returns the run summary (also written to summary.json).

    With `resume`, training continues from the run's last good checkpoint in out_dir: model, optimizer,
    schedule, RNG states and the position in the epoch's batch order, so it continues as if never stopped.
    A config that differs from the run's saved one is refused (listing the keys) unless `force`; one that changes
    the shapes of the model's parameters always. Corpus files that differ from the run's fingerprint are refused
    (naming them) unless `accept_data_change`; either way a resume encodes with the run's own tokenizer. With
    `aside`, an earlier run's files in out_dir are moved to a sibling folder instead of refusing the out_dir.
    """
    check_fits(cfg)  # before anything is built or written: a model no memory here holds is refused, naming its size
    existed, fresh = Path(cfg.out_dir).exists(), empty_or_absent(Path(cfg.out_dir))
    out, lock = claim_out_dir(cfg, resume, aside)
    try:
        return _train(cfg, out, callbacks, resume, force, accept_data_change)
    except BaseException as e:
        if fresh:  # refused before its first write, or stopped before its first checkpoint: nothing left behind
            with signals.held():  # a second signal (Ctrl-C, then SIGTERM) acts once the cleanup is done, not halfway
                remove_if_untouched(out, stopped=stopped_by_signal(e), keep_folder=existed)
        if advised := disk_full_advice(e, out):
            raise advised from e
        raise
    finally:
        unlock_run_dir(lock)


def _train(cfg: ExperimentConfig, out: Path, callbacks: list, resume: bool, force: bool, accept_data_change: bool) -> dict:
    ckpt_path, attempt, tokenizer, fingerprint = None, 0, None, "start"
    if resume:
        ckpt_path, attempt, tokenizer, fingerprint = _prepare_resume(cfg, out, force, accept_data_change)
    prepare_process(cfg)

    dm = TranslationDataModule(cfg)
    dm.tokenizer = tokenizer  # a resume's: the run's own; otherwise None, the tokenizer cache's for this corpus
    dm.prepare_data()
    dm.setup("fit")
    vocab = dm.tokenizer.vocab_size
    module = TranslationModule.from_config(cfg, vocab)
    module.tokenizer_proto = Path(dm.tokenizer.path).read_bytes()
    if not resume:  # a resumed run trained its first steps already
        first_pass(cfg, vocab)
    check_disk_space(out, module.params["total"], cfg.train.keep_last)
    if not resume:  # only now: a run refused before this point (bad corpus, no space) leaves no trace in out_dir
        write_file(out / "config.yaml", to_yaml(cfg))
    if fingerprint:
        record_fingerprint(out, cfg.data, module.tokenizer_proto, fingerprint)
    trainer, parts = build_trainer(cfg, out, vocab, module, attempt, callbacks)
    speed, stop, preemption, extra, wandb_logger = parts.speed, parts.stop, parts.preemption, parts.extra, parts.wandb_logger
    try:
        if resume:
            set_aside_results(out, attempt, cfg)
        fit_or_exit(trainer, module, dm, ckpt_path, preemption)
        with run_end(out):  # a signal from here on exits 75 (130), to resume the end, not 0 with no summary
            validated = "valid" in available_splits(cfg.data)
            if validated and stop.validated_step != trainer.global_step:
                # The run ended off the validation grid (max_steps or max_epochs not a multiple of val_every_steps), or
                # resumed after its last step with nothing left to train: validate the final weights, which the summary
                # reports, and save them as last.ckpt, which `ablate table --split test` scores when they are selected.
                # Saved first as well: a signal during this validation says training is saved, and loses no step.
                trainer.save_checkpoint(out / "checkpoints" / "last.ckpt", weights_only=False)
                trainer.validate(module, datamodule=dm, verbose=False)
                trainer.save_checkpoint(out / "checkpoints" / "last.ckpt", weights_only=False)  # full state, as every last.ckpt
            selected = select_weights(cfg, trainer, module, dm, out) if validated else {"selected": FINAL}
            summary = _summary(cfg, trainer, module, speed, stop, extra)
            summary, record = complete_summary(cfg, summary, trainer, module, dm, out, selected, validated, trainer.is_global_zero)
            if trainer.is_global_zero:
                publish(out, summary, record, wandb_logger)
            return summary
    finally:
        finish_wandb(wandb_logger)


def _prepare_resume(cfg: ExperimentConfig, out: Path, force: bool, accept_data_change: bool) -> tuple:
    """Check that the run in `out` can continue with `cfg` and its corpus files as they are now, refusing before any file
    changes; returns (checkpoint, attempt number, the run's own tokenizer, fingerprint record to write or None)."""
    saved = saved_config(out) if (out / "config.yaml").is_file() else {}
    members = saved.get("members", {})
    # A group's config has no member index (a member's has: resume_checkpoint says what continues a member). Its
    # checkpoint holds K members' weights, which no run's model loads, even with --force.
    if (size := members.get("size") or 1) > 1 and members.get("index") is None:
        how = (
            "rerun its sweep (ablate sweep ...), which continues its groups"
            if saved.get("sweep", {}).get("study")
            else f"resume it with the command that started it, --members {size} and its seeds or listed values, adding --resume"
        )
        raise ValueError(
            f"--resume: {out} is a group of {size} members ({out / 'config.yaml'}: members.size {size}), not a run: {how}; nothing was changed"
        )
    # The model the checkpoint must hold: config.yaml's (a change of shapes in `cfg` is refused by prepare_resume,
    # naming the keys), else the one `cfg` builds.
    model = saved.get("model") if (out / "config.yaml").is_file() else to_dict(cfg)["model"]
    ckpt_path = resume_checkpoint(out, model if isinstance(model, dict) else None)
    return ckpt_path, *prepare_resume(ckpt_path, [(out, cfg)], out, out, force, accept_data_change)


def epochs_trained(trainer, accumulate: int, steps: int | None = None) -> float:
    """Epochs trained, a partial one as its fraction (Lightning's current_epoch counts an epoch begun as done): optimizer
    steps (the trainer's, or a member's own `steps`) over the steps of an epoch, ceil(batches / accumulate), as
    Lightning steps on an epoch's last partial window."""
    n = trainer.num_training_batches
    if not n or math.isinf(n):
        return trainer.current_epoch
    return round((trainer.global_step if steps is None else steps) / math.ceil(n / accumulate), 2)


def _summary(cfg, trainer, module, speed, stop, extra) -> dict:
    best = trainer.checkpoint_callbacks[0]
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
    return {
        "out_dir": cfg.out_dir,
        "steps": trainer.global_step,
        "epochs": epochs_trained(trainer, cfg.train.accumulate),
        **stop.summary(trainer, cfg.train),  # stop_reason, flops, wall_seconds (the whole run), convergence
        "matmul_precision": torch.get_float32_matmul_precision(),  # what fp32 matmuls ran at (TF32 when "high")
        "params": module.params,
        **extra,
        "last": metrics,
        "best": {
            "metric": best.monitor,
            "value": None if best.best_model_score is None else float(best.best_model_score),
            "checkpoint": best.best_model_path,
        },
        "bleu_signature": module.bleu_signature,
        **{k: float(f"{v:.4g}") for k, v in speed.summary.items()},  # 4 significant digits: TFLOP/s and MFU are small numbers
    }
