"""How a run says it stopped and how to go on (ablate.run.callbacks; its signal handling is tested by running:
tests/faults/test_interrupt.py)."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from ablate.run.callbacks import run_end


def test_a_full_disk_mid_run_says_how_to_go_on_where_a_checkpoint_holds_the_training(tmp_path, monkeypatch):
    """The error named the file alone (exit 2), and a run a resume continues once space is freed looked lost."""
    from ablate.files.atomic import DiskFull
    from ablate.run.callbacks import disk_full_advice

    monkeypatch.setattr("sys.argv", ["ablate", "train", "c.yaml", "train.max_steps=9"])
    full = DiskFull(f"disk full: could not write {tmp_path / 'checkpoints' / 'best.ckpt'} (No space left on device)")
    full.errno = 28
    assert disk_full_advice(full, tmp_path) is None  # nothing saved yet: nothing to resume
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"")
    advised = disk_full_advice(full, tmp_path)
    assert isinstance(advised, DiskFull) and advised.errno == 28 and str(advised).startswith(str(full))
    assert str(advised).endswith("free space, then continue with: ablate train c.yaml train.max_steps=9 --resume")
    assert disk_full_advice(ValueError("no"), tmp_path) is None


def test_a_sweep_trial_says_to_run_its_sweep_again_not_ablate_train(monkeypatch):
    """A sweep's trial (python -m ablate.sweep.trial TRIAL.yaml) ended its train.log with 'continue with: ablate train
    CONFIG [overrides] --resume', which would train the run outside its study; the sweep run again continues it."""
    from ablate.run.callbacks import resume_command
    from ablate.run.exits import SWEEP_FILE_ENV

    monkeypatch.setattr("sys.argv", ["/x/ablate/sweep/trial.py", "runs/sweeps/s/trials/0000-base/trial.yaml", "--resume"])
    monkeypatch.delenv(SWEEP_FILE_ENV, raising=False)
    assert resume_command() == "ablate train CONFIG [overrides] --resume"
    monkeypatch.setenv(SWEEP_FILE_ENV, "sweeps/my sweep.yaml")
    assert resume_command() == "ablate sweep 'sweeps/my sweep.yaml' (the sweep this trial is in, with the flags it ran with)"


def test_the_resume_command_of_a_run_started_with_move_aside_is_one_ablate_train_takes(monkeypatch):
    """--move-aside moved the earlier run when the run began; with --resume it is refused as a flag pair."""
    from ablate.run.callbacks import resume_command
    from ablate.run.exits import SWEEP_FILE_ENV

    monkeypatch.delenv(SWEEP_FILE_ENV, raising=False)
    monkeypatch.setattr("sys.argv", ["ablate", "train", "exp.yaml", "--move-aside", "seed=2"])
    assert resume_command() == "ablate train exp.yaml seed=2 --resume"


@pytest.mark.parametrize("written", [False, True])
def test_a_signal_at_the_runs_end_says_whether_its_results_were_written(tmp_path, monkeypatch, caplog, written):
    """A Ctrl-C while the summary went to W&B, after summary.json was written whole, was said as an end not written."""
    monkeypatch.setattr(sys, "argv", ["ablate", "train", "run.yaml"])
    if written:
        (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(SystemExit) as stopped, run_end(tmp_path):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises at once
    assert stopped.value.code == 130
    said = caplog.records[-1].getMessage()
    if written:
        assert said == (
            f"stopped by Ctrl-C after its results were written ({tmp_path / 'summary.json'}), while they went to its W&B run, "
            "which may lack them; they are sent again by ablate train run.yaml --resume"
        )
    else:
        assert said.startswith(f"stopped by Ctrl-C after training, before the end of {tmp_path} (final validation")
