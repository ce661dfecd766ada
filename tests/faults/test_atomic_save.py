"""Checkpoints are written atomically: SIGKILL in the middle of saves never leaves a truncated or mixed file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each

WRITER = """
import sys, torch
from ablate.run.checkpoint_io import AtomicCheckpointIO
io, path, i = AtomicCheckpointIO(), sys.argv[1], 0
while True:  # ~40 MB per save, each holding one value throughout
    io.save_checkpoint({"step": i, "w": torch.full((10_000_000,), float(i))}, path)
    i += 1
"""


def test_sigkill_during_saves_leaves_the_last_complete_checkpoint(tmp_path):
    path = tmp_path / "last.ckpt"
    rng = random.Random(0)
    last_step = -1
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
        while not path.exists():
            time.sleep(0.01)
        time.sleep(rng.uniform(0.2, 1.5))  # lands inside a save most of the time: saving is nearly all the loop does
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        ckpt = torch.load(path, weights_only=True)
        assert (ckpt["w"] == ckpt["step"]).all() and ckpt["w"].numel() == 10_000_000
        assert ckpt["step"] >= 0
        last_step = ckpt["step"]
        path.unlink()
    assert last_step >= 0
    leftovers = [p.name for p in tmp_path.iterdir()]
    assert all(name.startswith(".last.ckpt.") and name.endswith(".tmp") for name in leftovers)  # only temp files remain


def test_resume_point_is_the_furthest_step_even_when_file_times_tie(tmp_path):
    """A preemption save lands milliseconds after the periodic one; a coarse file clock may stamp both alike.
    The resume point is chosen by the global_step inside each file, and an unreadable file is skipped."""
    from ablate.run.resume_point import resume_checkpoint
    from ablate.training.checkpoint import save_atomic

    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    for name, step in [("step=10.ckpt", 10), ("step=20.ckpt", 20), ("last.ckpt", 21)]:
        save_atomic({"state_dict": {}, "hyper_parameters": {}, "global_step": step, "optimizer_states": [{}]}, ckpts / name)
        os.utime(ckpts / name, ns=(1_000_000_000, 1_000_000_000))
    os.utime(ckpts / "step=10.ckpt", ns=(2_000_000_000, 2_000_000_000))  # newest by mtime, oldest by step
    assert resume_checkpoint(tmp_path).name == "last.ckpt"

    (ckpts / "last.ckpt").write_bytes((ckpts / "last.ckpt").read_bytes()[:100])  # truncated
    assert resume_checkpoint(tmp_path).name == "step=20.ckpt"
