"""Checkpoints are written atomically: SIGKILL in the middle of saves never leaves a truncated or mixed file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import torch

WRITER = """
import sys, torch
from ablate.checkpoint import AtomicCheckpointIO
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
