"""A planted W&B key never reaches any file a run writes (configs, logs, W&B files, checkpoints, summaries)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import tiny_experiment

from ablate.config import to_yaml

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each

CANARY = "ablate-canary-7d3f9c1e5b2a4f60a8e1c2d3b4a59687"  # 40+ chars, the shape of a W&B key


def test_wandb_key_from_the_environment_is_never_written(tmp_path):
    cfg = tiny_experiment(
        tmp_path, train={"max_steps": 6, "val_every_steps": 3}, logging={"wandb": True, "mode": "offline", "group": "canary"}
    )
    path = tmp_path / "run.yaml"
    path.write_text(to_yaml(cfg))
    env = {**os.environ, "WANDB_API_KEY": CANARY, "WANDB_MODE": "offline"}
    proc = subprocess.run([sys.executable, "-m", "ablate.cli", "train", str(path)], capture_output=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout.decode()[-2000:] + proc.stderr.decode()[-2000:]
    assert CANARY.encode() not in proc.stdout + proc.stderr
    written = [f for f in (tmp_path / "run").rglob("*") if f.is_file()]
    assert any(f.suffix == ".wandb" for f in written) and any(f.suffix == ".ckpt" for f in written)
    leaked = [str(f) for f in written if CANARY.encode() in f.read_bytes()]
    assert leaked == []
