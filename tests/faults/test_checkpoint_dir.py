"""Issue 18 item 10: a checkpoints/ folder that cannot take checkpoints fails before training, like out_dir does.

Today only out_dir is probed: with a read-only checkpoints/ inside a writable out_dir the run trains until its
first save and dies there with an OSError traceback (a checkpoints *file* dies the same way, FileExistsError).
Desired: exit 2 before any training, the message naming the folder. Root ignores permission bits, so as root the
folder is a read-only tmpfs mount (as in test_out_dir.py); otherwise it is chmod 555.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import ablate, write_experiment

pytestmark = pytest.mark.slow  # a run that reached training would take several seconds to fail


@pytest.fixture
def unwritable_checkpoints(tmp_path):
    """An empty checkpoints/ nobody can write into, inside a writable out_dir."""
    ckpts = tmp_path / "run" / "checkpoints"
    ckpts.mkdir(parents=True)
    if os.geteuid() != 0:
        ckpts.chmod(0o555)
        yield ckpts
        ckpts.chmod(0o755)
        return
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ckpts)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"root, and cannot mount a read-only tmpfs here (needs a privileged container): {proc.stderr.strip()}")
    try:
        yield ckpts
    finally:
        subprocess.run(["umount", str(ckpts)], capture_output=True)


def run_and_check(tmp_path: Path, ckpts: Path) -> None:
    proc = ablate("train", str(write_experiment(tmp_path)), timeout=300)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ablate train: error:")]
    assert proc.returncode == 2 and errors and "Traceback" not in proc.stderr, f"exit {proc.returncode}: {proc.stderr[-1500:]}"
    assert str(ckpts) in errors[-1], errors[-1]
    assert not (tmp_path / "run" / "metrics.csv").exists()  # refused before training


def test_a_read_only_checkpoints_folder_fails_before_training(tmp_path, unwritable_checkpoints):
    run_and_check(tmp_path, unwritable_checkpoints)


def test_a_checkpoints_file_in_place_of_the_folder_fails_before_training(tmp_path):
    ckpts = tmp_path / "run" / "checkpoints"
    ckpts.parent.mkdir()
    ckpts.write_text("not a folder\n")
    run_and_check(tmp_path, ckpts)
