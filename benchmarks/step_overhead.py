"""Framework overhead: `ablate train`'s real training step against a bare PyTorch loop doing the same work.

The ablate arm is the Trainer `ablate train` fits with (ablate.run.trainer.build_trainer: checkpoint, speed, stop-rule,
preemption and progress callbacks, CSV and W&B loggers and progress bar as the config says); validation and
checkpoints are configured beyond the run, so none falls inside the timed window. The bare arm is a plain loop over
the same DataLoader (same batches, same order, checked), on the same model (same seed and init, checked), with the
same loss (ablate.model.loss.translation_loss over target tokens), the optimizer and LR schedule from the module's own
configure_optimizers(), the same gradient clipping (train.clip_grad), autocast (train.precision) and compile setting
(train.compile). A step is timed from one batch start to the next (in the ablate arm, consecutive
on_train_batch_start calls, so Lightning's loop between steps counts), with no device synchronisation in either arm.
Besides wall time, the CPU time of this process (all its threads) per step and of its child processes (W&B's
service) over the window: on a machine shared with other work, wall time mostly measures the others' load.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/step_overhead.py [--steps 200] [--warmup 50] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import lightning as L
import torch

from ablate.data.module import TranslationDataModule
from ablate.experiment import load_config
from ablate.model.loss import translation_loss
from ablate.run.trainer import build_trainer
from ablate.training.module import TranslationModule

sys.path.insert(0, str(Path(__file__).parent))
from common import children_cpu_seconds, environment, to_device  # noqa: E402

TARGET = 1.15  # ablate/bare step time the framework may cost at most


def fingerprint(batch: dict) -> tuple:
    """What identifies a batch without reading device memory: its shapes and real-token counts."""
    return (*batch["src"].shape, batch["tgt_in"].shape[1], int(batch["src_tokens"]), int(batch["tgt_tokens"]))


def init_checksum(model: torch.nn.Module) -> float:
    return sum(float(p.detach().double().sum()) for p in model.parameters())


def setup(cfg):
    """What `ablate train` does before building its Trainer: seed, data, module (compiled in place if configured)."""
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    module = TranslationModule.from_config(cfg, dm.tokenizer.vocab_size)
    return dm, module


class StepClock(L.Callback):
    """Wall and process CPU clocks at every step's start (in Lightning: on_train_batch_start), the batches'
    fingerprints, the weights' checksum at the start, and child processes' CPU seconds at the window's two ends."""

    def __init__(self, window: tuple[int, int]):
        self.window = window  # the first and the one-past-last timed step
        self.starts: list[float] = []
        self.cpu: list[float] = []
        self.children: list[float] = []
        self.batches: list[tuple] = []
        self.checksum: float | None = None

    def on_train_start(self, trainer, pl_module) -> None:
        self.checksum = init_checksum(pl_module.model)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.tick(batch)

    def tick(self, batch: dict) -> None:
        if len(self.starts) in self.window:
            self.children.append(children_cpu_seconds())  # before the clocks: the /proc scan is not the step's
        self.starts.append(time.perf_counter())
        self.cpu.append(time.process_time())
        self.batches.append(fingerprint(batch))


def fit_ablate(cfg, out: Path, callbacks: list) -> None:
    """Fit `ablate train`'s own Trainer (build_trainer) with `callbacks` for cfg.train.max_steps steps."""
    dm, module = setup(cfg)
    module.tokenizer_proto = Path(dm.tokenizer.path).read_bytes()
    trainer, parts = build_trainer(cfg, out, dm.tokenizer.vocab_size, module, 0, callbacks)
    try:
        trainer.fit(module, datamodule=dm, weights_only=True)
    finally:
        if parts.wandb_logger is not None:
            import wandb

            wandb.finish()


def run_ablate(cfg, out: Path, window: tuple[int, int]) -> StepClock:
    clock = StepClock(window)
    fit_ablate(cfg, out, [clock])
    return clock


def autocast(precision: str, device: torch.device):
    """The autocast Lightning's precision plugin enters around a training step."""
    if precision.startswith("bf16-mixed"):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if precision.startswith("16-mixed"):
        return torch.autocast(device.type, dtype=torch.float16)
    return nullcontext()


def run_bare(cfg, steps: int, device: torch.device, window: tuple[int, int]) -> StepClock:
    """The same training steps as a plain loop: to device, loss, backward, clip, optimizer and schedule step."""
    dm, module = setup(cfg)
    module.to(device)
    model, t = module.model, cfg.train
    model.train()
    opt_cfg = module.configure_optimizers()
    opt, schedule = opt_cfg["optimizer"], opt_cfg["lr_scheduler"]["scheduler"]
    scaler = torch.amp.GradScaler(device.type) if t.precision.startswith("16-mixed") else None
    clock = StepClock(window)
    clock.checksum = init_checksum(model)
    loader = dm.train_dataloader()
    loader.batch_sampler.sampler.epoch_source = None  # no trainer: the loop sets the epoch itself
    epoch = 0
    while len(clock.starts) < steps:
        loader.batch_sampler.set_epoch(epoch)
        for batch in loader:
            if len(clock.starts) == steps:
                break
            clock.tick(batch)
            batch = to_device(batch, device, non_blocking=device.type == "cuda")
            opt.zero_grad(set_to_none=True)
            with autocast(t.precision, device):
                loss, _, ntok = translation_loss(model, batch, t.label_smoothing)
                loss = loss / ntok
            (scaler.scale(loss) if scaler else loss).backward()
            if t.clip_grad:
                if scaler:
                    scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(module.parameters(), t.clip_grad)
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            schedule.step()
        epoch += 1
    return clock


def step_seconds(clock: StepClock, warmup: int, steps: int) -> dict[str, list[float] | float]:
    """Wall and CPU seconds of steps warmup .. warmup+steps-1 (differences of consecutive step starts), and the
    child processes' CPU seconds per step over them."""
    if len(clock.starts) < warmup + steps + 1:
        raise RuntimeError(f"timed {len(clock.starts)} step starts, need warmup + steps + 1 = {warmup + steps + 1}")
    wall, cpu = (clocks[warmup : warmup + steps + 1] for clocks in (clock.starts, clock.cpu))
    return {"wall": [b - a for a, b in zip(wall, wall[1:])], "cpu": [b - a for a, b in zip(cpu, cpu[1:])],
            "children_cpu": (clock.children[1] - clock.children[0]) / steps}  # fmt: skip


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", nargs="+", default=["experiments/quickstart.yaml"], help="experiment YAML file(s)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides, e.g. train.precision=bf16-mixed")
    p.add_argument("--steps", type=int, default=200, help="timed steps per arm")
    p.add_argument("--warmup", type=int, default=50, help="untimed steps per arm before them")
    p.add_argument("--rounds", type=int, default=1, help="runs of both arms; the order alternates between rounds")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (train.num_threads) in both arms")
    p.add_argument("--json", metavar="OUT", help="also write the results to this JSON file")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    total = args.warmup + args.steps + 1  # the last step only ends the last timed one
    overrides = [
        f"train.max_steps={total}",
        f"train.val_every_steps={total + 1}",  # no validation, hence no checkpoint, inside the run
        f"train.accelerator={device.type}",
        "train.devices=1",
        f"train.num_threads={args.threads}",
        *args.set,
    ]
    cfg = load_config(args.config, overrides)
    window = (args.warmup, args.warmup + args.steps)
    seconds = {arm: {"wall": [], "cpu": [], "children_cpu": []} for arm in ("ablate", "bare")}
    ratios, cpu_ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            clocks = {}
            for arm in ("ablate", "bare") if r % 2 == 0 else ("bare", "ablate"):
                if arm == "ablate":
                    clocks[arm] = run_ablate(cfg, Path(tmp) / f"round{r}", window)
                else:
                    clocks[arm] = run_bare(cfg, total, device, window)
            if clocks["ablate"].batches[:total] != clocks["bare"].batches[:total]:
                raise RuntimeError("the two arms trained on different batches")
            if clocks["ablate"].checksum != clocks["bare"].checksum:
                raise RuntimeError("the two arms started from different weights")
            timed = {arm: step_seconds(c, args.warmup, args.steps) for arm, c in clocks.items()}
            for arm, t in timed.items():
                seconds[arm]["wall"] += t["wall"]
                seconds[arm]["cpu"] += t["cpu"]
                seconds[arm]["children_cpu"].append(t["children_cpu"])
            ratios.append(statistics.median(timed["ablate"]["wall"]) / statistics.median(timed["bare"]["wall"]))
            cpu_ratios.append(statistics.median(timed["ablate"]["cpu"]) / statistics.median(timed["bare"]["cpu"]))
            print(f"round {r + 1}/{args.rounds}: ablate/bare median step time {ratios[-1]:.3f} (CPU {cpu_ratios[-1]:.3f})", flush=True)

    env = environment(device)
    t, lg = cfg.train, cfg.logging
    ms = {arm: 1000 * statistics.median(s["wall"]) for arm, s in seconds.items()}
    mean = {arm: 1000 * statistics.fmean(s["wall"]) for arm, s in seconds.items()}
    cpu_ms = {arm: 1000 * statistics.median(s["cpu"]) for arm, s in seconds.items()}
    child_ms = {arm: 1000 * statistics.fmean(s["children_cpu"]) for arm, s in seconds.items()}
    ratio, cpu_ratio = statistics.median(ratios), statistics.median(cpu_ratios)
    loggers = "csv" + (f", wandb ({lg.mode})" if lg.wandb else "")
    print(f"config: {' '.join(args.config)} {' '.join(args.set)}".rstrip())
    print(f"precision {t.precision}, compile {'on' if t.compile else 'off'}, clip_grad {t.clip_grad}, loggers: {loggers}, "
          f"progress bar {'on' if lg.progress else 'off'}; {args.steps} timed steps after {args.warmup} per arm, "
          f"{args.rounds} round(s)")  # fmt: skip
    print(f"device {env['machine']} ({device.type}), torch {env['torch']}, {env['threads']} threads")
    for arm, label in (("ablate", "ablate train step"), ("bare", "bare PyTorch step")):
        print(f"{label}: median {ms[arm]:.2f} ms (mean {mean[arm]:.2f}); CPU: this process {cpu_ms[arm]:.2f} ms "
              f"(median), child processes {child_ms[arm]:.2f} ms (mean)")  # fmt: skip
    print(f"CPU time ratio ablate/bare (this process, median): {cpu_ratio:.3f}")
    print(f"step overhead ratio ablate/bare: {ratio:.3f} (target <= {TARGET})")
    if args.json:
        out = {"args": vars(args), "env": env, "median_ms": ms, "mean_ms": mean, "cpu_median_ms": cpu_ms,
               "children_cpu_ms": child_ms, "ratio": ratio, "round_ratios": ratios, "cpu_ratio": cpu_ratio,
               "round_cpu_ratios": cpu_ratios, "target": TARGET, "step_seconds": seconds}  # fmt: skip
        Path(args.json).write_text(json.dumps(out, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
