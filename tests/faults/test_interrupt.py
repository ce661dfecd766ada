"""Issue 18 item 4: Ctrl-C (SIGINT) stops `ablate train` and `ablate sweep` as cleanly as a preemption signal.

Today SIGINT reaches Lightning as KeyboardInterrupt: `ablate train` exits 1 having saved nothing since the last
periodic checkpoint and prints no resume hint; `ablate sweep` ends with a KeyboardInterrupt traceback (exit -2).
Desired: save last.ckpt after the current step (as for SIGTERM), print how to resume, exit 130 (128 + SIGINT, not
the preemption code 75); a second Ctrl-C aborts at once. Signals are real: a test plugin (fault_injection) makes the training
process send itself SIGINT at a given optimizer step; the sweep gets SIGINT on its whole process group, as a
terminal sends it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from fault_injection import fault_plugin
from helpers import ablate, write_experiment
from optuna.trial import TrialState

pytestmark = pytest.mark.slow  # real training runs of several seconds each

INTERRUPTED_EXIT = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C'd command


def global_step(ckpt: Path) -> int:
    return int(torch.load(ckpt, map_location="cpu", weights_only=True)["global_step"])


def test_ctrl_c_during_train_saves_after_the_step_prints_the_resume_command_and_exits_130(tmp_path):
    path = write_experiment(tmp_path, max_steps=40, plugins=[fault_plugin(tmp_path, signal_at="12:INT")])
    proc = ablate("train", str(path), popen=True)  # SIGINT as optimizer step 12 starts
    out, err = proc.communicate(timeout=300)
    ckpts = tmp_path / "run" / "checkpoints"
    saved = global_step(ckpts / "last.ckpt") if (ckpts / "last.ckpt").exists() else None
    assert proc.returncode == INTERRUPTED_EXIT, f"exit {proc.returncode}, last.ckpt at step {saved}: {err[-2000:]}"
    assert saved == 13, f"last.ckpt holds step {saved}, not the step in progress when Ctrl-C came (12, done: 13)"
    assert "--resume" in out + err, err[-2000:]
    assert "weights_only" not in out + err  # Lightning's note on a save that did not say what it holds
    assert not (tmp_path / "run" / "summary.json").exists()

    resumed = ablate("train", str(path), "--resume", popen=True)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 40


def test_a_second_ctrl_c_aborts_at_once(tmp_path):
    """With the first Ctrl-C turned into a graceful save-and-stop, a second one (here within the same step, so before
    the save) stops the process at once, as a Ctrl-C: 130, saying nothing new was saved (Lightning's own shutdown
    exited 1, as a failure would)."""
    path = write_experiment(tmp_path, max_steps=100_000, plugins=[fault_plugin(tmp_path, signal_at="7:INT+INT")])
    proc = ablate("train", str(path), timeout=240)
    assert proc.returncode == INTERRUPTED_EXIT, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert "stopped by Ctrl-C at once, saving nothing new; continue from the last checkpoint" in proc.stderr
    assert "step=5.ckpt" in {p.name for p in (tmp_path / "run" / "checkpoints").iterdir()}
    assert not (tmp_path / "run" / "summary.json").exists()


def test_sigterm_as_the_fit_sets_up_stops_the_run_at_its_first_step_saved(tmp_path):
    """Between the fit's start and Lightning's own handlers (setup, a resume's checkpoint load) SIGTERM killed the
    process (-15, no word; its new folder unstartable): now it is noted and acted on at the first step boundary."""
    path = write_experiment(tmp_path, max_steps=20, plugins=[fault_plugin(tmp_path, signal_at="0@setup:TERM")])
    proc = ablate("train", str(path), timeout=240)
    assert proc.returncode == 75, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert "stopped by a preemption signal at step 1" in proc.stderr
    resumed = ablate("train", str(path), "--resume", timeout=240)  # the plugin fires once: the resume trains to the end
    assert resumed.returncode == 0 and json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 20, resumed.stderr[-2000:]


@pytest.mark.parametrize("made", [False, True], ids=["new folder", "folder made empty beforehand"])
def test_ctrl_c_as_the_fit_sets_up_is_one_line_and_leaves_nothing_to_resume(tmp_path, made):
    """A first Ctrl-C before training starts reaches Lightning, not Preemption: it printed Lightning's "Detected
    KeyboardInterrupt" and "stopped by Ctrl-C at once", as if it were a second one. One line says what happened; what
    the attempt wrote goes (the folder too, unless it was there, empty, before), and the same command starts the run."""
    path = write_experiment(tmp_path, max_steps=20, plugins=[fault_plugin(tmp_path, signal_at="0@setup:INT")])
    if made:
        (tmp_path / "run").mkdir()
    proc = ablate("train", str(path), timeout=240)
    assert proc.returncode == INTERRUPTED_EXIT, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    said = [line for line in proc.stderr.splitlines() if "Ctrl-C" in line or "KeyboardInterrupt" in line]
    assert said == ["stopped by Ctrl-C before training started; nothing was saved yet: the same command starts it again"], proc.stderr
    assert (list((tmp_path / "run").iterdir()) == []) if made else not (tmp_path / "run").exists()
    again = ablate("train", str(path), timeout=240)  # the plugin fires once
    assert again.returncode == 0 and json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 20, again.stderr[-2000:]


def both_training(trials: Path) -> bool:
    """Two trial directories, each with a periodic checkpoint and no summary yet."""
    dirs = [p for p in trials.glob("*") if p.is_dir()] if trials.is_dir() else []
    training = [p for p in dirs if any((p / "checkpoints").glob("step=*.ckpt")) and not (p / "summary.json").exists()]
    return len(training) >= 2


def said_saved(trials: Path) -> bool:
    """Every trial's train.log says it saved after the Ctrl-C: it is winding down, its last checkpoint written."""
    logs = [p / "train.log" for p in trials.glob("*") if p.is_dir()]
    return bool(logs) and all(log.is_file() and "stopped by Ctrl-C at step" in log.read_text(errors="replace") for log in logs)


@pytest.mark.parametrize("presses", [1, 2], ids=["ctrl-c", "ctrl-c-twice"])
def test_ctrl_c_on_a_sweep_stops_workers_and_trials_cleanly_and_a_rerun_continues(tmp_path, presses):
    """Twice: the second Ctrl-C comes as the trials wind down after saving, and ends them at once (killed by SIGINT):
    they were interrupted all the same, not failed, and the rerun continues them (it used to start their rows over)."""
    # Long enough that both trials are still training when the second one saves its first checkpoint, on a loaded
    # machine too (a worker can start seconds after the other; step=10.ckpt of the first is rotated out by then).
    base = write_experiment(tmp_path, "base", max_steps=1000, val_every_steps=10, log_every_steps=10)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "name": "ctrlc",
                "base": [str(base)],
                "out_dir": str(tmp_path / "out"),
                "objective": {"metric": "val/loss", "direction": "minimize"},
                "variants": {"base": {}, "A-h1": {"model.heads": 1}},
            }
        )
    )
    env = {"ABLATE_SWEEP_HEARTBEAT": "1"}
    cmd = ("sweep", str(sweep), "--workers", "2")
    proc = ablate(*cmd, env=env, popen=True, start_new_session=True)  # its own process group, like a job in a terminal
    trials = tmp_path / "out" / "trials"
    try:
        deadline = time.time() + 240
        while not both_training(trials):
            assert proc.poll() is None and time.time() < deadline, "never had two trials training"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals every process of the foreground group
        if presses == 2:
            deadline = time.time() + 120
            while proc.poll() is None and not said_saved(trials) and time.time() < deadline:
                time.sleep(0.005)
            if proc.poll() is not None or not said_saved(trials):
                pytest.skip("the sweep ended before its trials said they saved: no second Ctrl-C could land as they wound down")
            os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == INTERRUPTED_EXIT and "Traceback" not in err, f"exit {proc.returncode}: {err[-3000:]}"
    assert "ablate sweep" in out + err and sweep.name in out + err, "no hint how to continue: " + (out + err)[-2000:]
    for trial_dir in sorted(p for p in trials.iterdir() if p.is_dir()):
        ckpts = trial_dir / "checkpoints"
        periodic = max(int(p.stem.split("=")[1]) for p in ckpts.glob("step=*.ckpt"))
        assert global_step(ckpts / "last.ckpt") > periodic, f"{trial_dir.name} saved nothing when interrupted"

    rerun = ablate(*cmd, env=env, popen=True)
    out, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err[-3000:]
    study = optuna.load_study(study_name="ctrlc", storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    done = [t for t in study.get_trials() if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["row"] for t in done) == ["A-h1", "base"]
    assert all("continues" in t.user_attrs for t in done), "an interrupted row started over instead of continuing"
