"""`ablate train`: one complete training run, the unit of every ablation study.

The run directory (`out_dir`) receives config.yaml (the fully resolved config), checkpoints
(best by val/bleu, the last K, last.ckpt), metrics.csv, W&B offline files and summary.json.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import lightning as L
import torch
import yaml
from lightning.pytorch.callbacks import ModelCheckpoint, RichProgressBar
from lightning.pytorch.loggers import CSVLogger, WandbLogger

from ablate.checkpoint import AtomicCheckpointIO
from ablate.config import ExperimentConfig, flatten, to_dict, to_yaml
from ablate.data import TranslationDataModule
from ablate.lit import TranslationModule
from ablate.flops import train_flops
from ablate.metrics import SpeedCallback

log = logging.getLogger(__name__)


def git_sha() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def prepare_out_dir(cfg: ExperimentConfig, resume: bool = False) -> Path:
    """Create out_dir and prove it is writable before any work starts; never train over an earlier run."""
    out = Path(cfg.out_dir)
    existing = sorted((out / "checkpoints").glob("*.ckpt")) if (out / "checkpoints").is_dir() else []
    if existing and not resume:
        raise ValueError(
            f"out_dir={cfg.out_dir} already holds a run ({len(existing)} checkpoints, e.g. {existing[0].name}); "
            "resume it with --resume, or choose another out_dir so nothing of it is overwritten"
        )
    if resume and not existing:
        raise ValueError(f"--resume: out_dir={cfg.out_dir} holds no checkpoint to resume from")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise ValueError(f"out_dir={cfg.out_dir} is not writable: {e.strerror}") from None
    return out


def lock_run_dir(out: Path) -> int | None:
    """Hold out_dir for this process: a second `ablate train` on it (or a sweep continuing a trial whose first
    process still runs) is refused instead of interleaving checkpoints. The lock dies with the process, kill -9
    included. Returns the descriptor to close when done; DDP ranks other than 0 share rank 0's lock."""
    if os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("NODE_RANK", "0") != "0":
        return None
    fd = os.open(out / ".run.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise ValueError(f"out_dir={out} is in use by another training process (pid {holder}); wait for it to end or stop it") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def run_dir_in_use(out: Path) -> bool:
    try:
        fd = lock_run_dir(out)
    except ValueError:
        return True
    if fd is not None:
        os.close(fd)
    return False


def make_wandb_logger(cfg: ExperimentConfig, out: Path, extra: dict) -> WandbLogger | None:
    lc = cfg.logging
    if not lc.wandb or lc.mode == "disabled":
        return None
    os.environ.setdefault("WANDB_SILENT", "true")

    def logger(mode: str) -> WandbLogger:
        return WandbLogger(
            project=lc.project, entity=lc.entity, group=lc.group, name=lc.name or out.name, tags=list(lc.tags),
            save_dir=str(out), mode=mode, config={**flatten(to_dict(cfg)), **extra}, log_model=False,
        )

    if lc.mode != "online":
        return logger(lc.mode)
    online = logger("online")
    try:
        online.experiment  # connect now rather than inside fit(): training must never die because logging did
        return online
    except Exception as e:  # unreachable server, bad or missing key, quota...
        from ablate.study import redact

        first = redact(str(e).splitlines()[0] if str(e) else "")[:200]
        log.warning("W&B is unreachable or misconfigured (%s: %s); logging offline under %s, upload later with "
                    "`wandb sync`", type(e).__name__, first, out)
        return logger("offline")


PREEMPTED_EXIT = 75  # EX_TEMPFAIL: stopped by SIGTERM/SIGUSR1 after saving; `--resume` continues


class Preemption(L.Callback):
    """SIGTERM or SIGUSR1 (cluster preemption): save last.ckpt at the next optimizer step, exit with PREEMPTED_EXIT.

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

    def _note(self, signum, frame) -> None:
        self.signal = signum

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Not on_fit_start: Lightning installs its own SIGTERM handler after that hook, and it would stop the run
        # at once, between step boundaries. (A signal before training starts is Lightning's: nothing to save yet.)
        for signum in (signal.SIGTERM, signal.SIGUSR1):
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self._note)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int) -> None:
        if self.saved is not None or trainer.fit_loop.epoch_loop._should_accumulate():
            return
        stop = self.signal is not None
        if trainer.world_size > 1:
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            trainer.save_checkpoint(self.out / "checkpoints" / "last.ckpt")
            self.saved = trainer.global_step
            if trainer.is_global_zero:
                log.warning("stopped by a preemption signal at step %d; saved %s; continue with `ablate train ... --resume`",
                            trainer.global_step, self.out / "checkpoints" / "last.ckpt")
            # Lightning stops through SIGTERMException once this batch's bookkeeping (logging) is done.
            trainer._signal_connector.received_sigterm = True

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        from lightning.pytorch.utilities.exceptions import SIGTERMException

        if isinstance(exception, SIGTERMException) and self.saved is None and trainer.is_global_zero:
            log.warning("stopped by a signal before training started; nothing new to save in %s", self.out / "checkpoints")
        if self.saved is not None and self.signal == signal.SIGUSR1 and os.environ.get("SLURM_JOB_ID") and trainer.is_global_zero:
            subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]], check=False)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        for signum, previous in self._previous.items():  # after fit a signal acts as it did before
            if signal.getsignal(signum) == self._note:
                signal.signal(signum, previous)


class SelfSignal(L.Callback):
    """Fault injection for tests: ABLATE_DEBUG_SIGNAL="STEP[@val]:SIGNAME[:RANK]" makes the process of global rank
    RANK (default 0) send itself a real SIGNAME as the first batch of optimizer step STEP (0-based) starts (with
    gradient accumulation, the start of that step's window), or with @val, as the validation after STEP steps does."""

    def __init__(self, spec: str):
        when, name, *rank = spec.split(":")
        step, _, phase = when.partition("@")
        self.step, self.validation = int(step), phase == "val"
        self.signum, self.rank = signal.Signals[f"SIG{name.removeprefix('SIG')}"], int(rank[0]) if rank else 0
        self.fired = False

    def _fire(self, trainer: L.Trainer) -> None:
        if not self.fired and trainer.global_step == self.step and trainer.global_rank == self.rank:
            self.fired = True
            os.kill(os.getpid(), self.signum)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if not self.validation:
            self._fire(trainer)

    def on_validation_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        if self.validation and not trainer.sanity_checking:
            self._fire(trainer)


def make_trainer(cfg: ExperimentConfig, out: Path, loggers: list, speed: SpeedCallback, extra_callbacks: list = ()) -> L.Trainer:
    t = cfg.train
    monitor, mode = ("val/bleu", "max") if t.val_bleu else ("val/loss", "min")
    callbacks = [
        ModelCheckpoint(dirpath=out / "checkpoints", filename="best", monitor=monitor, mode=mode, save_top_k=1,
                        auto_insert_metric_name=False, enable_version_counter=False),
        # The K most recent validation points, for `ablate average` (the paper averaged the last 5).
        ModelCheckpoint(dirpath=out / "checkpoints", filename="step={step}", monitor="step", mode="max",
                        save_top_k=t.keep_last, save_last=True, auto_insert_metric_name=False, enable_version_counter=False),
        speed,
        Preemption(out),
        *([SelfSignal(spec)] if (spec := os.environ.get("ABLATE_DEBUG_SIGNAL")) else []),
        *extra_callbacks,
    ]
    if cfg.logging.progress:
        callbacks.append(RichProgressBar(leave=True))
    every = t.val_every_steps
    return L.Trainer(
        max_steps=t.max_steps, max_epochs=t.max_epochs or -1,
        accelerator=t.accelerator, devices=t.devices, strategy=t.strategy, precision=t.precision,
        accumulate_grad_batches=t.accumulate, gradient_clip_val=t.clip_grad or None,
        val_check_interval=every * t.accumulate if every else 1.0, check_val_every_n_epoch=None if every else 1,
        log_every_n_steps=t.log_every_steps, logger=loggers, callbacks=callbacks, default_root_dir=out,
        use_distributed_sampler=False,  # the token-bucket sampler shards by rank itself
        enable_progress_bar=cfg.logging.progress, num_sanity_val_steps=1, deterministic=t.deterministic,
        enable_model_summary=False,
        plugins=[AtomicCheckpointIO()],
    )


def check_disk_space(out: Path, params: int, keep_last: int) -> None:
    """Fail before training, not hours later at a save, when out_dir cannot hold the checkpoints the run keeps.

    Each checkpoint holds fp32 weights and Adam's two moments (about 12 bytes a parameter); the run keeps
    `keep_last` periodic ones, best.ckpt and last.ckpt, plus one temp file during an atomic save.
    """
    per_checkpoint = 12 * params + (1 << 20)
    need = per_checkpoint * (keep_last + 3)
    # A resumed run replaces checkpoints it already holds: their space counts as available.
    free = shutil.disk_usage(out).free + sum(f.stat().st_size for f in (out / "checkpoints").glob("*.ckpt"))
    if free < need:
        raise ValueError(f"out_dir={out} has {free / 2**20:.1f} MiB free, but its checkpoints need about {need / 2**20:.1f} MiB "
                         f"({keep_last} kept + best + last + a temp file, {per_checkpoint / 2**20:.1f} MiB each); free space, "
                         "lower train.keep_last or choose another out_dir")


def config_changes(saved: dict, new: dict) -> dict[str, tuple]:
    """Keys whose value differs between a run's saved config and a new one (sweep bookkeeping ignored)."""
    a, b = flatten(saved), flatten(new)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k) and not k.startswith("sweep.")}


def changes_from_saved_config(out: Path, cfg: ExperimentConfig) -> dict[str, tuple]:
    """config_changes between the run's saved config.yaml (none saved: every key differs) and `cfg`."""
    saved = yaml.safe_load((out / "config.yaml").read_text()) if (out / "config.yaml").exists() else {}
    return config_changes(saved, to_dict(cfg))


def resume_checkpoint(out: Path) -> Path:
    """The checkpoint furthest into training that loads: last.ckpt or a step checkpoint (a kill between the two
    saves leaves last.ckpt behind; a preemption save leaves it ahead), skipping any that is unreadable (killed
    mid-save, truncated). Ordered by the global_step inside each file, not by mtime: file timestamps come from a
    coarse clock, and two saves a few milliseconds apart can carry the same one."""
    from ablate.checkpoint import CheckpointError, load_checkpoint

    candidates, problems = [], []
    for path in [*(out / "checkpoints").glob("step=*.ckpt"), out / "checkpoints" / "last.ckpt"]:
        if not path.exists():
            continue
        try:
            step = int(load_checkpoint(path, mmap=True).get("global_step", -1))
        except CheckpointError as e:
            problems.append(str(e))
            log.warning("cannot resume from %s: %s", path, e)
            continue
        candidates.append(((step, path.name == "last.ckpt", path.stat().st_mtime_ns), path))
    if not candidates:
        raise ValueError(f"no readable checkpoint in {out / 'checkpoints'}: " + "; ".join(problems))
    return max(candidates)[1]


def train(cfg: ExperimentConfig, callbacks: list = (), resume: bool = False, force: bool = False) -> dict:
    """Train, validate and checkpoint one model; returns the run summary (also written to summary.json).

    With `resume`, training continues from the run's last good checkpoint in out_dir: model, optimizer,
    schedule, RNG states and the position in the epoch's batch order, so it continues as if never stopped.
    A config that differs from the run's saved one is refused (listing the keys) unless `force`.
    """
    out = prepare_out_dir(cfg, resume)
    lock = lock_run_dir(out)
    try:
        return _train(cfg, out, callbacks, resume, force)
    finally:
        if lock is not None:
            os.close(lock)


def _train(cfg: ExperimentConfig, out: Path, callbacks: list, resume: bool, force: bool) -> dict:
    ckpt_path, attempt = None, 0
    if resume:
        changes = changes_from_saved_config(out, cfg)
        if changes and not force:
            listed = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changes.items())
            raise ValueError(f"--resume: the config differs from the run's saved one in {listed}; use --force to resume anyway")
        for stale in (out / "checkpoints").glob(".*.tmp"):  # saves a kill interrupted (see AtomicCheckpointIO)
            stale.unlink()
        ckpt_path = resume_checkpoint(out)
        attempt = 1 + sum(1 for _ in out.glob("resume-*"))
        if changes:  # forced: the new config is the run's config from now on (the old one is kept beside it)
            (out / f"config.before-resume-{attempt}.yaml").write_text((out / "config.yaml").read_text())
            (out / "config.yaml").write_text(to_yaml(cfg))
        log.warning("resuming %s from %s", out, ckpt_path)
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    if not resume:
        (out / "config.yaml").write_text(to_yaml(cfg))

    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    vocab = dm.tokenizer.vocab_size
    module = TranslationModule.from_config(cfg, vocab)
    module.tokenizer_proto = Path(dm.tokenizer.path).read_bytes()
    check_disk_space(out, module.params["total"], cfg.train.keep_last)
    extra = {"params/total": module.params["total"], "git_sha": git_sha(), "vocab_size": vocab}
    speed = SpeedCallback(cfg.train.log_every_steps, lambda batch: train_flops(cfg.model, vocab, batch), cfg.train.peak_tflops)
    wandb_logger = make_wandb_logger(cfg, out, extra)
    # A resumed attempt logs its metrics beside the first one's (resume-N/metrics.csv), never over them.
    csv_logger = CSVLogger(str(out), name="", version=f"resume-{attempt}" if attempt else "")
    loggers = [csv_logger] + ([wandb_logger] if wandb_logger else [])
    trainer = make_trainer(cfg, out, loggers, speed, callbacks)
    started = time.perf_counter()
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    try:
        try:
            trainer.fit(module, datamodule=dm, ckpt_path=str(ckpt_path) if ckpt_path else None, weights_only=True)
        except SIGTERMException:
            raise SystemExit(PREEMPTED_EXIT) from None
        if not any(k.startswith("val/") for k in trainer.callback_metrics):
            # Resumed from a checkpoint taken after the last step (the first attempt died while finishing up):
            # fit() had nothing left to train or validate, and the summary needs the final weights' metrics.
            trainer.validate(module, datamodule=dm, verbose=False)
        summary = _summary(cfg, trainer, module, speed, time.perf_counter() - started, extra)
        if trainer.is_global_zero and cfg.train.eval_longer_than:
            summary.update(_eval_long(cfg, module, dm))
        if trainer.is_global_zero:
            (out / "summary.json").write_text(json.dumps(summary, indent=2))
            if wandb_logger is not None:
                wandb_logger.experiment.summary.update(summary)
        return summary
    finally:
        if wandb_logger is not None:
            import wandb

            wandb.finish()


def _eval_long(cfg: ExperimentConfig, module: TranslationModule, dm: TranslationDataModule) -> dict:
    """Length extrapolation: BLEU of the final weights on validation pairs longer than any the run trained on."""
    from ablate.evaluate import longer_than, score, translate

    n = cfg.train.eval_longer_than
    srcs, refs = longer_than(dm.tokenizer, *dm.raw("valid"), n)
    if not srcs:
        return {"val_long/sentences": 0}
    hyps = translate(module.model.eval(), dm.tokenizer, srcs, cfg)
    result = score(hyps, refs)
    return {"val_long/bleu": result["bleu"], "val_long/sentences": result["sentences"], "val_long/min_src_tokens": n + 1}


def _summary(cfg, trainer, module, speed, wall, extra) -> dict:
    best = trainer.checkpoint_callbacks[0]
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
    summary = {
        "out_dir": cfg.out_dir, "steps": trainer.global_step, "epochs": trainer.current_epoch, "wall_seconds": round(wall, 1),
        "params": module.params, **extra,
        "last": metrics,
        "best": {"metric": best.monitor, "value": None if best.best_model_score is None else float(best.best_model_score),
                 "checkpoint": best.best_model_path},
        "bleu_signature": module.bleu_signature,
        **{k: float(f"{v:.4g}") for k, v in speed.summary.items()},  # 4 significant digits: TFLOP/s and MFU are small numbers
    }
    if cfg.sweep.study:
        summary["sweep"] = to_dict(cfg)["sweep"]
    return summary
