"""Forced resumes: `--resume --force` with a key that changes parameter shapes is refused before any file changes
(issue 18 item 3); one that keeps them (dropout) averages only the checkpoints written since.

Today `ablate train CONFIG model.d_model=64 --resume --force` first rewrites config.yaml (keeping the old one as
config.before-resume-1.yaml) and creates resume-1/, and only then fails to load the checkpoint with a size-mismatch
traceback; afterwards a plain `--resume` of the unchanged config is refused ("the config differs"). Desired: the
compatibility check runs before anything is touched, refuses shape-changing keys even with --force (exit 2,
naming them), and the run resumes as before. The run here was preempted (SIGTERM) at step 7 of 20.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fault_injection import fault_plugin
from helpers import ablate, snapshot, write_experiment

pytestmark = pytest.mark.slow  # one trained run (about 10 s) plus a few seconds per attempt


@pytest.fixture(scope="module")
def preempted(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("guard")
    proc = ablate("train", str(write_experiment(tmp, max_steps=20, plugins=[fault_plugin(tmp, signal_at="7:TERM")])))
    assert proc.returncode == 75, proc.stderr[-3000:]
    shutil.copytree(tmp / "run", tmp / "pristine")
    return tmp


@pytest.fixture
def run(preempted) -> tuple[Path, Path]:
    """(config, out_dir) of the preempted run, restored in place (its saved config names its own paths)."""
    shutil.rmtree(preempted / "run")
    shutil.copytree(preempted / "pristine", preempted / "run")
    return preempted / "run.yaml", preempted / "run"


@pytest.mark.parametrize("override", ["model.d_model=64", "model.d_ff=128"])
def test_forced_resume_with_a_shape_changing_key_is_refused_before_touching_the_run(run, override):
    config, run_dir = run
    before = snapshot(run_dir)
    key = override.split("=")[0]
    proc = ablate("train", str(config), override, "--resume", "--force")
    assert snapshot(run_dir) == before, (
        f"the run directory changed: {sorted(set(snapshot(run_dir)) ^ set(before))} "
        f"(config.yaml same: {(run_dir / 'config.yaml').read_bytes() == before['config.yaml']})"
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ablate train: error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert errors and key in errors[-1], proc.stderr[-2000:]

    again = ablate("train", str(config), "--resume")  # the run is as it was: it continues
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 20


def test_a_forced_resume_that_changes_a_model_setting_averages_only_its_own_checkpoints(tmp_path):
    """Dropout changed on a forced resume (no shape changes, so allowed): the step checkpoints from before it hold
    another model config, which average_checkpoints refuses to mix, so the end-of-run average takes only those
    written since, and the run finishes instead of failing after all its training."""
    config = write_experiment(
        tmp_path, max_steps=20, val_every_steps=4, final_average=3, plugins=[fault_plugin(tmp_path, signal_at="13:TERM")]
    )
    first = ablate("train", str(config))
    assert first.returncode == 75, first.stderr[-3000:]
    proc = ablate("train", str(config), "model.dropout=0.3", "--resume", "--force")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 20 and summary["averaged_from"] == ["step=16.ckpt", "step=20.ckpt"], summary.get("averaged_from")
    assert summary["selected"] == "avg of last 2" and summary["basis"].endswith("last-2 average")


def test_a_finished_run_resumed_further_and_stopped_reads_unfinished_not_done(tmp_path):
    """`--resume --force` with more steps, stopped by SIGTERM, left the old summary.json (6 steps), and `ablate table`
    counted the run finished at 6 steps; now the resume sets it aside, the table leaves the run out naming it, and the
    resume that ends writes the summary anew."""
    done = write_experiment(tmp_path, "short", out_dir=tmp_path / "base", max_steps=6)
    assert ablate("train", str(done)).returncode == 0
    further = write_experiment(
        tmp_path, "long", out_dir=tmp_path / "base", max_steps=20, plugins=[fault_plugin(tmp_path, signal_at="12:TERM")]
    )
    stopped = ablate("train", str(further), "--resume", "--force")
    assert stopped.returncode == 75, stopped.stderr[-3000:]
    assert not (tmp_path / "base" / "summary.json").exists()
    assert json.loads((tmp_path / "base" / "summary.before-resume-1.json").read_text())["steps"] == 6
    table = ablate("table", str(tmp_path))
    assert f"left out: {tmp_path / 'base'} (no summary.json" in table.stderr, table.stdout + table.stderr
    finished = ablate("train", str(further), "--resume", "--force")
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert json.loads((tmp_path / "base" / "summary.json").read_text())["steps"] == 20


def test_a_member_group_resumed_as_a_run_is_refused_before_touching_it(tmp_path):
    """`ablate train CONFIG --resume --force` on a group's folder (no --members) rewrote its config.yaml and only then
    failed with a size-mismatch traceback, after which the right command was refused too."""
    config = write_experiment(tmp_path, max_steps=4)
    assert ablate("train", str(config), "--members", "2").returncode == 0
    group = tmp_path / "run"
    before = snapshot(group)
    proc = ablate("train", str(config), "--resume", "--force")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "is a group of 2 members" in proc.stderr and "--members 2" in proc.stderr, proc.stderr[-2000:]
    assert snapshot(group) == before
    assert ablate("train", str(config), "train.max_steps=6", "--members", "2", "--resume", "--force").returncode == 0
