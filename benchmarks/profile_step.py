"""Where `ablate train`'s step spends its time: cProfile and torch.profiler over a window of its real Trainer.

benchmarks/step_overhead.py says how much slower ablate's step is than a bare loop; this says why. It fits the same
Trainer (build_trainer, every callback and logger the config names; with --members K, `ablate train --members K`'s
own `train_members`) and, between steps WARMUP and WARMUP + STEPS, runs Python's cProfile (host time by function,
callees included) and torch.profiler (operators, CPU and device time); the run ends there, before any final decoding.
Writes OUT/cprofile.txt (by cumulative and by own time), OUT/ops.txt (key_averages by self CPU and by device time)
and prints the heads of both.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/profile_step.py --device cuda --set train.precision=bf16-mixed
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import sys
import tempfile
from pathlib import Path

import lightning as L
import torch

sys.path.insert(0, str(Path(__file__).parent))
from step_overhead import fit_ablate  # noqa: E402

from ablate.experiment import load_config  # noqa: E402


class Done(Exception):
    """Raised at the window's end: nothing after it (validation, final decoding) is what the profile is for."""


class Window(L.Callback):
    """cProfile and torch.profiler on from the start of step `first` to the start of step `last`, then `Done`."""

    def __init__(self, first: int, last: int, device: torch.device):
        self.first, self.last = first, last
        self.cprofile = cProfile.Profile()
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.torch = torch.profiler.profile(activities=activities)
        self.on = False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == self.first:
            self.torch.__enter__()
            self.cprofile.enable()
            self.on = True
        elif step == self.last and self.on:
            self.stop()
            raise Done

    def stop(self) -> None:
        self.cprofile.disable()
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the device time of the window's last kernels belongs to it
        self.torch.__exit__(None, None, None)
        self.on = False


def fit(cfg, window: Window, out: Path) -> None:
    """`ablate train`'s fit of `cfg` with `window` among its callbacks, into `out`, until the window raises Done."""
    with contextlib.suppress(Done):
        if cfg.members.size > 1:
            from ablate.config.members import member_configs
            from ablate.run.members import train_members

            train_members(cfg, member_configs(cfg), member_callbacks=[lambda runs: window])
        else:
            fit_ablate(cfg, out, [window])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", nargs="+", default=["experiments/quickstart.yaml"])
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--members", type=int, default=1, help="K > 1: the group step of `ablate train --members K`")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="profile-out")
    p.add_argument("--rows", type=int, default=40)
    args = p.parse_args()
    device = torch.device(args.device)
    total = args.warmup + args.steps + 2
    overrides = [f"train.max_steps={total}", f"train.val_every_steps={total + 1}", f"train.accelerator={device.type}",
                 "train.devices=1", *args.set]  # fmt: skip
    window = Window(args.warmup, args.warmup + args.steps, device)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "run"
        cfg = load_config(args.config, [*overrides, f"out_dir={out_dir}", f"members.size={args.members}"])
        fit(cfg, window, out_dir)
    if window.on:
        window.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = io.StringIO()
    for key in ("cumulative", "tottime"):
        text.write(f"==== cProfile, {args.steps} steps, by {key} ====\n")
        pstats.Stats(window.cprofile, stream=text).sort_stats(key).print_stats(args.rows)
    (out / "cprofile.txt").write_text(text.getvalue())
    ops = window.torch.key_averages()
    sorts = ["self_cpu_time_total"] + (["self_device_time_total"] if device.type == "cuda" else [])
    tables = "\n".join(f"==== torch.profiler, by {s} ====\n" + ops.table(sort_by=s, row_limit=args.rows) for s in sorts)
    (out / "ops.txt").write_text(tables)
    print(text.getvalue()[:6000])
    print(tables[:6000])
    host = pstats.Stats(window.cprofile).total_tt / args.steps  # seconds a step the host spent, under the profilers
    device_us = sum(e.self_device_time_total for e in ops) / args.steps if device.type == "cuda" else None
    busy = f"device {device_us / 1e3:.1f} ms" if device_us is not None else "device -"
    print(f"per step ({args.members} member{'s' if args.members > 1 else ''}): host {host * 1e3:.1f} ms, {busy}")
    print(f"wrote {out}/cprofile.txt and {out}/ops.txt")


if __name__ == "__main__":
    main()
