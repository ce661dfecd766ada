"""Issue 18 item 2: `ablate average` never silently replaces a checkpoint, and `--resume` never continues from an
averaged (weights-only) one.

Today `ablate average --run-dir R -o R/checkpoints/last.ckpt` overwrites last.ckpt (it is not one of the inputs),
and `ablate train --resume` then picks that file (it has the newest step) and dies with Lightning's KeyError
traceback ("checkpoint contains only the model"). The run directory here is a run preempted (SIGTERM) at step 14
of 30: step=5.ckpt, step=10.ckpt, best.ckpt and last.ckpt (step 15).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fault_injection import fault_plugin
from helpers import ablate, run_cli, write_experiment

from ablate.cli import main

pytestmark = pytest.mark.slow  # every test needs the trained run below (about 10 s)


@pytest.fixture(scope="module")
def preempted_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("preempted")
    path = write_experiment(tmp, max_steps=30, plugins=[fault_plugin(tmp, signal_at="14:TERM")])
    proc = ablate("train", str(path))
    assert proc.returncode == 75, proc.stderr[-3000:]
    names = sorted(p.name for p in (tmp / "run" / "checkpoints").glob("*.ckpt"))
    assert names == ["best.ckpt", "last.ckpt", "step=10.ckpt", "step=5.ckpt"], names
    shutil.copytree(tmp / "run", tmp / "pristine")
    return tmp


@pytest.fixture
def run(preempted_run) -> tuple[Path, Path]:
    """The preempted run as it was left: (its config file, its out_dir). Restored in place before each test, since
    a run's saved config names its own paths (a copy elsewhere would be a different config to --resume)."""
    run_dir = preempted_run / "run"
    shutil.rmtree(run_dir)
    shutil.copytree(preempted_run / "pristine", run_dir)
    return preempted_run / "run.yaml", run_dir


def averaged_over(run_dir: Path, target: str, tmp_path: Path) -> None:
    """What today's `ablate average --run-dir R -o R/checkpoints/TARGET` leaves: the average of the last two step
    checkpoints in place of TARGET (written beside, then copied, so this setup works once overwriting is refused)."""
    avg = tmp_path / "avg.ckpt"
    assert main(["average", "--run-dir", str(run_dir), "--last", "2", "-o", str(avg)]) == 0
    shutil.copyfile(avg, run_dir / "checkpoints" / target)


@pytest.mark.parametrize("target", ["last.ckpt", "best.ckpt"])
def test_average_refuses_to_overwrite_an_existing_checkpoint(run, capsys, target):
    _, run_dir = run
    ckpt = run_dir / "checkpoints" / target
    before = ckpt.read_bytes()
    rc, out = run_cli(capsys, "average", "--run-dir", str(run_dir), "--last", "2", "-o", str(ckpt))
    assert ckpt.read_bytes() == before, f"{target} was overwritten (exit {rc}): {out[-500:]}"
    assert rc == 2 and target in out and "--force" in out, out[-2000:]


def test_average_with_force_overwrites_an_existing_checkpoint(run, capsys, tmp_path):
    _, run_dir = run
    ckpt = run_dir / "checkpoints" / "best.ckpt"
    before = ckpt.read_bytes()
    rc, out = run_cli(capsys, "average", "--run-dir", str(run_dir), "--last", "2", "-o", str(ckpt), "--force")
    assert rc == 0, out[-2000:]
    assert ckpt.read_bytes() != before


def test_resume_never_picks_an_averaged_checkpoint(run, tmp_path):
    config, run_dir = run
    averaged_over(run_dir, "last.ckpt", tmp_path)
    proc = ablate("train", str(config), "--resume")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    import json

    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 30  # continued from step=10.ckpt to the end


def test_resume_from_only_a_weights_only_checkpoint_is_a_clear_error(run, tmp_path):
    config, run_dir = run
    averaged_over(run_dir, "last.ckpt", tmp_path)
    for p in (run_dir / "checkpoints").glob("*.ckpt"):
        if p.name != "last.ckpt":
            p.unlink()
    proc = ablate("train", str(config), "--resume")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ablate train: error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert errors and "last.ckpt" in errors[-1], proc.stderr[-2000:]


def test_checkpoints_across_a_resume_average_and_another_run_of_the_same_seed_and_model_does_not(run, tmp_path, capsys):
    """A row differing only in train.* trains the same seed and model: its checkpoints passed every check, and its
    mean with this run's was no run's weights. Each run's checkpoints now carry its id, which a resume keeps."""
    config, run_dir = run
    before = run_dir / "checkpoints" / "step=10.ckpt"
    assert ablate("train", str(config), "--resume").returncode == 0
    after = run_dir / "checkpoints" / "step=30.ckpt"
    assert main(["average", str(before), str(after), "-o", str(tmp_path / "across.ckpt")]) == 0
    other = tmp_path / "other"  # the same corpus and tokenizer, seed and model: a row of another learning rate
    assert ablate("train", str(config), "train.max_steps=5", "train.lr_scale=0.5", f"out_dir={other}").returncode == 0
    apart = other / "checkpoints" / "step=5.ckpt"
    rc, out = run_cli(capsys, "average", str(apart), str(before), "-o", str(tmp_path / "mixed.ckpt"))
    assert rc == 2 and "the same seed and model, trained apart" in out and not (tmp_path / "mixed.ckpt").exists()
