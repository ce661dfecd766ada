"""Faults injected for real: a training process killed with SIGKILL mid-epoch resumes and continues exactly as
the uninterrupted run (model, optimizer, schedule, RNG states and data position restored); a changed config is
refused; a truncated last.ckpt falls back to the newest good checkpoint."""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from fault_injection import fault_plugin
from helpers import tiny_experiment

from ablate.config import to_yaml

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each

STEPS, VAL_EVERY = 150, 10


def write_config(tmp_path: Path, out: str, plugins=(), **train) -> Path:
    cfg = tiny_experiment(
        tmp_path,
        model={"dropout": 0.2},  # dropout: the RNG state matters for the losses to match
        train={
            "max_steps": STEPS,
            "val_every_steps": VAL_EVERY,
            "log_every_steps": 1,
            "keep_last": 5,
            "val_bleu": False,
            "num_threads": 1,
            **train,
        },
        logging={"wandb": False, "progress": False},
    )
    cfg.out_dir = str(tmp_path / out)
    cfg.plugins = [str(p) for p in plugins]  # named, not imported here: the run in its subprocess imports them
    path = tmp_path / f"{out}.yaml"
    path.write_text(to_yaml(cfg))
    return path


def ablate(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ablate.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


def uninterrupted_losses(tmp_path: Path) -> dict[int, float]:
    full = ablate("train", str(write_config(tmp_path, "full")))
    assert full.wait(timeout=300) == 0, full.stdout.read().decode()[-3000:]
    expected = losses(tmp_path / "full" / "metrics.csv")
    assert len(expected) == STEPS
    return expected


def signal_after_second_checkpoint(path: Path, out_dir: Path, signum: int) -> tuple[subprocess.Popen, str]:
    """Start `ablate train`, and send `signum` as soon as the step-2*VAL_EVERY checkpoint exists (mid-epoch)."""
    proc = ablate("train", str(path))
    ckpt = out_dir / "checkpoints" / f"step={2 * VAL_EVERY}.ckpt"
    deadline = time.time() + 300
    while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signum)
    return proc, proc.communicate(timeout=120)[0].decode()


def assert_same_losses(after: dict[int, float], expected: dict[int, float]) -> None:
    """Every loss a resumed run logged equals the uninterrupted run's at that step (float tolerance on CPU)."""
    for step, loss in after.items():
        assert loss == pytest.approx(expected[step], rel=1e-5, abs=1e-6), f"step {step}: {loss} vs uninterrupted {expected[step]}"


def losses(metrics: Path) -> dict[int, float]:
    with open(metrics) as f:
        return {int(r["step"]): float(r["train/loss"]) for r in csv.DictReader(f) if r.get("train/loss")}


def test_sigkill_mid_epoch_then_resume_matches_the_uninterrupted_run(tmp_path):
    expected = uninterrupted_losses(tmp_path)
    path = write_config(tmp_path, "killed")
    proc, _ = signal_after_second_checkpoint(path, tmp_path / "killed", signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (tmp_path / "killed" / "summary.json").exists()

    resumed = ablate("train", str(path), "--resume")
    out = resumed.communicate(timeout=300)[0].decode()
    assert resumed.returncode == 0, out[-3000:]
    after = losses(tmp_path / "killed" / "resume-1" / "metrics.csv")
    first = min(after)
    assert first > VAL_EVERY and max(after) == STEPS - 1 and len(after) == STEPS - first
    assert_same_losses(after, expected)
    before = losses(tmp_path / "killed" / "metrics.csv")  # the first attempt's metrics are kept, not overwritten
    assert min(before) == 0 and all(before[s] == pytest.approx(expected[s], rel=1e-5) for s in before)


def test_resume_refuses_a_changed_config_unless_forced_and_skips_a_truncated_last_checkpoint(tmp_path):
    path = write_config(tmp_path, "run", max_steps=20)
    assert ablate("train", str(path)).wait(timeout=300) == 0
    ckpts = tmp_path / "run" / "checkpoints"
    changed = write_config(tmp_path, "run", max_steps=26, label_smoothing=0.2)
    proc = ablate("train", str(changed), "--resume")
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 2 and "train.label_smoothing: 0.1 -> 0.2" in out and "train.max_steps: 20 -> 26" in out, out[-3000:]

    last = (ckpts / "last.ckpt").read_bytes()
    (ckpts / "last.ckpt").write_bytes(last[: len(last) // 3])  # a save cut short
    proc = ablate("train", str(changed), "--resume", "--force")
    out = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 0, out[-3000:]
    assert "cannot resume from" in out and "last.ckpt" in out and "step=20.ckpt" in out
    assert (
        min(losses(tmp_path / "run" / "resume-1" / "metrics.csv")) == 20
        and max(losses(tmp_path / "run" / "resume-1" / "metrics.csv")) == 25
    )

    proc = ablate("train", str(write_config(tmp_path, "empty")), "--resume")
    assert proc.wait(timeout=120) == 2 and b"holds no checkpoint" in proc.stdout.read()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1], ids=["SIGTERM", "SIGUSR1"])
def test_preemption_signal_saves_and_exits_then_resume_matches(tmp_path, signum):
    expected = uninterrupted_losses(tmp_path)
    path = write_config(tmp_path, "preempted")
    proc, out = signal_after_second_checkpoint(path, tmp_path / "preempted", signum)
    assert proc.returncode == 75, out[-3000:]  # PREEMPTED_EXIT
    assert re.search(r"continue with: ablate train \S+\.yaml --resume", out), out[-2000:]
    saved = torch.load(tmp_path / "preempted" / "checkpoints" / "last.ckpt", weights_only=True)
    assert 2 * VAL_EVERY <= saved["global_step"] < STEPS

    resumed = ablate("train", str(path), "--auto-resume")
    out = resumed.communicate(timeout=300)[0].decode()
    assert resumed.returncode == 0, out[-3000:]
    after = losses(tmp_path / "preempted" / "resume-1" / "metrics.csv")
    assert min(after) == saved["global_step"] and max(after) == STEPS - 1
    assert_same_losses(after, expected)


def test_resume_from_an_epoch_end_checkpoint_matches(tmp_path):
    """Validation (and checkpoints) once per epoch: the resume point is an epoch boundary."""
    full = ablate("train", str(write_config(tmp_path, "full", val_every_steps=0, max_steps=60)))
    assert full.wait(timeout=300) == 0
    expected = losses(tmp_path / "full" / "metrics.csv")
    path = write_config(tmp_path, "epochs", val_every_steps=0, max_steps=60)
    proc = ablate("train", str(path))
    ckpts = tmp_path / "epochs" / "checkpoints"
    deadline = time.time() + 300
    while len(list(ckpts.glob("step=*.ckpt"))) < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    resumed = ablate("train", str(path), "--resume")
    out = resumed.communicate(timeout=300)[0].decode()
    assert resumed.returncode == 0, out[-3000:]
    after = losses(tmp_path / "epochs" / "resume-1" / "metrics.csv")
    assert max(after) == 59 and len(after) == 60 - min(after)
    assert_same_losses(after, expected)


def test_sigusr1_inside_a_slurm_job_requeues_it(tmp_path):
    """Under SLURM (SLURM_JOB_ID set), SIGUSR1 saves, then asks `scontrol requeue JOBID` (a stand-in records the call)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "scontrol.calls"
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (bin_dir / "scontrol").chmod(0o755)
    path = write_config(tmp_path, "slurm")
    env = {**os.environ, "SLURM_JOB_ID": "4242", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = ablate("train", str(path), env=env)
    ckpt = tmp_path / "slurm" / "checkpoints" / f"step={VAL_EVERY}.ckpt"
    deadline = time.time() + 300
    while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGUSR1)
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 75, out[-3000:]
    assert calls.read_text().split() == ["requeue", "4242"]
    assert torch.load(tmp_path / "slurm" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] >= VAL_EVERY


def losses_after_self_signal(tmp_path: Path, out: str, spec: str, **train) -> tuple[dict[int, float], dict[int, float], int]:
    """Run to the end; run again with a real signal raised at a given batch (tests/fault_injection.py), which must
    save and exit with PREEMPTED_EXIT; resume. Returns (uninterrupted losses, resumed losses, saved global_step)."""
    full = ablate("train", str(write_config(tmp_path, f"{out}-full", **train)))
    log = full.communicate(timeout=600)[0].decode()
    assert full.returncode == 0, log[-3000:]
    path = write_config(tmp_path, out, plugins=[fault_plugin(tmp_path / f"{out}-faults", signal_at=spec)], **train)
    proc = ablate("train", str(path))
    log = proc.communicate(timeout=600)[0].decode()
    assert proc.returncode == 75, log[-3000:]
    assert re.search(r"continue with: ablate train \S+\.yaml --resume", log), log[-2000:]
    saved = torch.load(tmp_path / out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    resumed = ablate("train", str(path), "--resume")
    log = resumed.communicate(timeout=600)[0].decode()
    assert resumed.returncode == 0, log[-3000:]
    return losses(tmp_path / f"{out}-full" / "metrics.csv"), losses(tmp_path / out / "resume-1" / "metrics.csv"), saved


def test_preemption_in_the_middle_of_gradient_accumulation_saves_at_the_next_step(tmp_path):
    """accumulate=2: the signal arrives as the first of step 16's two batches starts. Saving after that batch would
    lose its gradients (the resumed run would step on the second batch alone); the save waits for the step."""
    expected, after, saved = losses_after_self_signal(tmp_path, "accum", "16:USR1", accumulate=2, max_steps=40)
    assert saved == 17  # step 16 (0-based) done
    assert min(after) == saved and max(after) == 39
    assert_same_losses(after, expected)


def test_sigusr1_to_one_ddp_rank_outside_slurm_stops_every_rank_at_one_step(tmp_path):
    """Two CPU processes (DDP over gloo), no SLURM: SIGUSR1 reaches rank 1 only. Both ranks agree to stop after the
    same step, last.ckpt is saved, the launcher exits with PREEMPTED_EXIT, and the resumed DDP run matches."""
    ddp = dict(devices=2, strategy="ddp", accelerator="cpu", max_steps=40)
    expected, after, saved = losses_after_self_signal(tmp_path, "ddp", "24:USR1:1", **ddp)
    assert saved == 25
    assert min(after) == saved and max(after) == 39
    assert_same_losses(after, expected)


def test_sigterm_during_validation_saves_after_the_next_step(tmp_path):
    """The signal arrives while the validation after step 20 runs: validation finishes, step 20 trains, and the save
    follows it. (Lightning's own handler, had it been left in place, would stop the run before any save.)"""
    expected, after, saved = losses_after_self_signal(tmp_path, "val", "20@val:TERM", max_steps=40)
    assert saved == 21
    assert min(after) == saved and max(after) == 39
    assert_same_losses(after, expected)


def test_a_run_dir_in_use_by_another_process_is_refused_and_left_alone(tmp_path):
    """Two processes on one run (a second `--resume`, or a sweep rerun while the first attempt still runs) would
    interleave checkpoints; the second is refused, naming the process that holds the directory."""
    from ablate.run.run_lock import lock_run_dir, run_dir_in_use

    path = write_config(tmp_path, "run", max_steps=20)
    assert ablate("train", str(path)).wait(timeout=300) == 0
    ckpts = {p.name: p.read_bytes() for p in (tmp_path / "run" / "checkpoints").iterdir()}
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from ablate.run.run_lock import lock_run_dir; "
            "lock_run_dir(Path(sys.argv[1])); print('held', flush=True); time.sleep(60)",
            str(tmp_path / "run"),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline() == b"held\n"
        assert run_dir_in_use(tmp_path / "run")
        proc = ablate("train", str(write_config(tmp_path, "run", max_steps=30)), "--resume", "--force")
        out = proc.communicate(timeout=120)[0].decode()
        assert proc.returncode == 2 and f"in use by another training process (pid {holder.pid})" in out, out[-2000:]
        assert {p.name: p.read_bytes() for p in (tmp_path / "run" / "checkpoints").iterdir()} == ckpts
    finally:
        holder.kill()
        holder.wait()
    assert not run_dir_in_use(tmp_path / "run")  # the lock died with its process
    os.close(lock_run_dir(tmp_path / "run"))


def test_a_run_that_died_after_its_last_step_resumes_into_the_same_summary(tmp_path):
    """Killed between the final checkpoint and summary.json (a sweep then continues the trial): resuming has no step
    left to train, and still reports the final weights' validation metrics and the training's speed, the same as the
    first attempt's."""
    from ablate.experiment import load_config
    from ablate.run.train import train

    cfg = load_config([str(write_config(tmp_path, "done", max_steps=20))])
    first = train(cfg)
    (tmp_path / "done" / "summary.json").unlink()
    again = train(cfg, resume=True)
    assert again["steps"] == first["steps"] == 20
    assert again["last"] == pytest.approx(first["last"]) and "val/loss" in again["last"]
    assert again["best"]["value"] == pytest.approx(first["best"]["value"])
    # its speed is the first attempt's training, from the checkpoint (it had no speed/* keys at all)
    for key in ("speed/train_seconds", "speed/tokens_per_s", "speed/step_ms"):
        assert again[key] == first[key], key
    assert again["speed/validations"] == first["speed/validations"] + 1  # the final weights' validation, run again


def test_a_float64_run_resumes_exactly(tmp_path):
    """precision=64: Lightning restores the checkpoint's weights before its precision plugin converts the module, so
    a model still in float32 then rounded every resumed weight (val/loss 3.0877 against the uninterrupted 3.0838 on
    the tiny corpus); the module is float64 from the start, and the resumed losses are the uninterrupted run's."""
    expected, after, saved = losses_after_self_signal(tmp_path, "fp64", "20:TERM", max_steps=40, precision="64")
    assert saved == 21
    assert min(after) == saved and max(after) == 39
    assert all(after[step] == expected[step] for step in after), {s: (after[s], expected[s]) for s in after if after[s] != expected[s]}


@pytest.mark.parametrize("signame, code", [("TERM", 75), ("INT", 130)])
def test_a_signal_during_the_runs_end_exits_to_resume_it_not_0_without_a_summary(tmp_path, signame, code):
    """25 steps, validations every 10: the final weights' validation after training (off the grid) is where the signal
    arrives. Lightning's handler there made `ablate train` exit 0 with no summary; it exits 75 (130) saying to resume,
    and the resume writes the summary the uninterrupted run writes."""
    import json

    train = {"max_steps": 25, "val_every_steps": 10}
    full = ablate("train", str(write_config(tmp_path, "whole", **train)))
    assert full.wait(timeout=300) == 0
    path = write_config(tmp_path, "cut", plugins=[fault_plugin(tmp_path / "faults", signal_at=f"25@val:{signame}")], **train)
    # SIGINT's default disposition back: under xdist a worker ignores SIGINT, and its children would inherit that
    proc = ablate("train", str(path), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    log = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == code, log[-3000:]
    assert "after training, before the end of" in log and re.search(r"continue with: ablate train \S+\.yaml --resume", log), log[-2000:]
    assert "before training started" not in log and not (tmp_path / "cut" / "summary.json").exists()
    # "training is saved": all 25 steps, not the 20 of the last save on the grid (the signals review's find)
    assert torch.load(tmp_path / "cut" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 25
    again = ablate("train", str(path), "--resume")
    assert again.wait(timeout=300) == 0, again.stdout.read().decode()[-3000:]
    whole, cut = (json.loads((tmp_path / name / "summary.json").read_text()) for name in ("whole", "cut"))
    assert cut["steps"] == whole["steps"] == 25 and cut["last"]["val/loss"] == pytest.approx(whole["last"]["val/loss"], rel=1e-6)
