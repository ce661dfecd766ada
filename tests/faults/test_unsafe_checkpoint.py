"""Issue 18 item 11: a refused malicious checkpoint is reported plainly, never with a hint to load it unsafely.

Today the message is the first line of torch's UnpicklingError cut to 200 characters: "Weights only load failed.
This file can still be loaded, to do so you have two options, <ANSI bold>do those steps only if you trust the
source of the checkpoint<ANSI reset>. " - it stops before saying what is wrong and points at the unsafe load
(`weights_only=False`). Desired: the message names the file and says plainly that it holds objects ablate will
not unpickle; nothing suggesting weights_only=False, no terminal escape codes. The file is built as in
tests/integration/test_train.py: unpickling it would run Path.touch.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers import run_cli

from ablate.experiment import load_config


@pytest.fixture
def evil(tmp_path) -> tuple[Path, Path]:
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (Path.touch, (marker,))

    path = tmp_path / "run" / "checkpoints" / "evil.ckpt"
    path.parent.mkdir(parents=True)
    torch.save({"state_dict": {}, "hyper_parameters": Exploit(), "global_step": 5}, path)
    return path, marker


def assert_plain_refusal(rc, output: str, path: Path, marker: Path) -> None:
    assert not marker.exists()  # refused, never executed (true today as well)
    assert rc == 2, output[-1500:]
    assert path.name in output, output[-1500:]
    for unsafe in ("weights_only", "can still be loaded", "trust the source"):
        assert unsafe not in output, f"suggests the unsafe load ({unsafe!r}): {output.strip()[-800:]}"
    assert "\x1b[" not in output, f"terminal escape codes copied from torch's message: {output.strip()[-800:]!r}"
    assert "unpickle" in output.lower(), output[-1500:]


@pytest.mark.parametrize("command", ["evaluate", "translate", "average"])
def test_a_malicious_checkpoint_is_refused_plainly(evil, capsys, tmp_path, command):
    path, marker = evil
    extra = ["-o", str(tmp_path / "avg.ckpt")] if command == "average" else []
    rc, output = run_cli(capsys, command, str(path), *extra)
    assert_plain_refusal(rc, output, path, marker)


@pytest.mark.slow  # a process of its own (several seconds)
def test_a_malicious_checkpoint_in_a_run_is_refused_plainly_on_resume(evil, tmp_path):
    path, marker = evil
    path.rename(path.with_name("last.ckpt"))
    config = tmp_path / "exp.yaml"
    config.write_text(
        yaml.safe_dump(
            {"model": {"d_model": 32, "heads": 4}, "out_dir": str(tmp_path / "run"), "logging": {"wandb": False, "progress": False}}
        )
    )
    # The run's saved config, as `ablate train` leaves it, so that --resume gets as far as choosing a checkpoint.
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(dataclasses.asdict(load_config([config]))))
    # A real process: the warning about each unreadable checkpoint goes through logging, which pytest would capture.
    proc = subprocess.run(
        [sys.executable, "-m", "ablate.cli", "train", str(config), "--resume"], capture_output=True, text=True, timeout=300
    )
    assert_plain_refusal(proc.returncode, proc.stdout + proc.stderr, path.with_name("last.ckpt"), marker)
