"""W&B unreachable: a run configured for online logging finishes, logging offline, with a warning."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from helpers import tiny_experiment

from ablate.config import to_yaml
from ablate.files.wandb_offline import find_runs, read_run

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def test_online_logging_with_the_server_down_falls_back_to_offline(tmp_path):
    cfg = tiny_experiment(
        tmp_path,
        train={"max_steps": 6, "val_every_steps": 3},
        logging={"wandb": True, "mode": "online", "group": "down", "name": "fallback"},
    )
    path = tmp_path / "run.yaml"
    path.write_text(to_yaml(cfg))
    env = {**os.environ, "WANDB_BASE_URL": f"http://127.0.0.1:{closed_port()}", "WANDB_API_KEY": "x" * 40, "WANDB_INIT_TIMEOUT": "5"}
    env.pop("WANDB_MODE", None)
    proc = subprocess.run([sys.executable, "-m", "ablate.cli", "train", str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "W&B is unreachable or misconfigured" in proc.stderr and "logging offline" in proc.stderr
    runs = [read_run(p) for p in find_runs(tmp_path / "run")]
    offline = [r for r in runs if r.path.parent.name.startswith("offline-run-")]
    assert offline and offline[0].group == "down" and "val/loss" in {k for row in offline[0].history for k in row}
    assert (tmp_path / "run" / "summary.json").exists()
