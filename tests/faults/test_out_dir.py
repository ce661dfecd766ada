"""A full or read-only output dir fails before any training, with an error naming it (real filesystems: tmpfs)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import tiny_experiment

from ablate.config import to_yaml

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each


@pytest.fixture
def mount_tmpfs(tmp_path):
    mounted = []

    def mount(name: str, options: str):
        target = tmp_path / name
        target.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root in a privileged container): {proc.stderr.strip()}")
        mounted.append(target)
        return target

    yield mount
    for target in mounted:
        subprocess.run(["umount", str(target)], capture_output=True)


def run(tmp_path, out_dir) -> subprocess.CompletedProcess:
    cfg = tiny_experiment(tmp_path, train={"max_steps": 4, "val_every_steps": 2}, logging={"wandb": False})
    cfg.out_dir = str(out_dir)
    path = tmp_path / "run.yaml"
    path.write_text(to_yaml(cfg))
    return subprocess.run([sys.executable, "-m", "ablate.cli", "train", str(path)], capture_output=True, text=True, timeout=300)


def test_full_out_dir_fails_before_training(tmp_path, mount_tmpfs):
    full = mount_tmpfs("full", "size=256k")
    proc = run(tmp_path, full / "run")
    assert proc.returncode == 2
    assert f"out_dir={full / 'run'} has" in proc.stderr and "MiB free" in proc.stderr and "keep_last" in proc.stderr
    assert "Epoch" not in proc.stderr + proc.stdout  # no training started


def test_read_only_out_dir_fails_before_training(tmp_path, mount_tmpfs):
    ro = mount_tmpfs("ro", "ro,size=1m")
    proc = run(tmp_path, ro / "run")
    assert proc.returncode == 2
    assert f"out_dir={ro / 'run'} is not a writable folder" in proc.stderr
