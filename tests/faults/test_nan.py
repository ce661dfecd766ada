"""A loss that turns NaN (forced by a test plugin, fault_injection) stops the run, naming the step, and the last checkpoint
on disk is the last good one: finite weights from before the NaN. Empty corpora are a clear error."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from fault_injection import fault_plugin
from helpers import tiny_experiment

from ablate.config import to_yaml

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each


@pytest.mark.parametrize(
    "log_every, caught_by, last_good",
    [
        (2, "train/loss is nan at step 1", 9),  # the periodic loss check sees it first
        (50, "non-finite weights at step 12", 9),
    ],  # the loss check is rare: the save at step 12 refuses the weights
    ids=["loss-check", "save-guard"],
)
def test_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, log_every, caught_by, last_good):
    cfg = tiny_experiment(
        tmp_path,
        train={
            "max_steps": 40,
            "val_every_steps": 3,
            "log_every_steps": log_every,
            "val_bleu": False,
            "keep_last": 10,
        },
    )
    cfg.plugins = [str(fault_plugin(tmp_path, nan_from=10))]  # named, not imported here: the run imports it
    path = tmp_path / "run.yaml"
    path.write_text(to_yaml(cfg))
    proc = subprocess.run([sys.executable, "-m", "ablate.cli", "train", str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "FloatingPointError" in proc.stderr and caught_by in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "run" / "summary.json").exists()
    ckpts = tmp_path / "run" / "checkpoints"
    last = torch.load(ckpts / "last.ckpt", weights_only=True)
    assert last["global_step"] == last_good
    assert all(torch.isfinite(v).all() for v in last["state_dict"].values() if v.is_floating_point())
    assert sorted(int(p.stem.split("=")[1]) for p in ckpts.glob("step=*.ckpt")) == [3, 6, 9]


def test_empty_corpus_files_are_a_clear_error(tmp_path):
    cfg = tiny_experiment(tmp_path)
    (tmp_path / "corpus" / "train.en").write_text("\n\n")
    (tmp_path / "corpus" / "train.de").write_text("\n\n")
    path = tmp_path / "run.yaml"
    path.write_text(to_yaml(cfg))
    proc = subprocess.run([sys.executable, "-m", "ablate.cli", "train", str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "no sentence pairs" in proc.stderr and "train.en" in proc.stderr
