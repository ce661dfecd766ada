"""Issue 18 item 3: `--resume --force` with a key that changes parameter shapes is refused before any file changes.

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
from helpers import ablate, snapshot, write_experiment

pytestmark = pytest.mark.slow  # one trained run (about 10 s) plus a few seconds per attempt


@pytest.fixture(scope="module")
def preempted(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("guard")
    proc = ablate("train", str(write_experiment(tmp, max_steps=20)), env={"ABLATE_DEBUG_SIGNAL": "7:TERM"})
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
