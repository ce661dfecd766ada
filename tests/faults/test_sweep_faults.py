"""A sweep worker killed mid-trial: its trial is failed by the heartbeat and its row rerun by the other worker;
no finished row runs again and the study stays readable."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
import yaml
from helpers import sweep_writer, trial_states
from optuna.trial import TrialState

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each


def pids_of(wanted) -> list[int]:
    """The processes whose command line (its arguments, as bytes) `wanted` accepts; one gone meanwhile is passed over."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if wanted(cmd):
                pids.append(int(proc.name))
    return pids


def worker_pids(index: int, sweep: Path) -> list[int]:
    """Worker `index` of the sweep run from `sweep` only: other sweeps on this machine must not be touched."""
    return pids_of(lambda cmd: b"ablate.sweep.worker" in cmd and str(sweep).encode() in cmd and cmd[-3:-2] == [str(index).encode()])


def stopped_after_its_first_checkpoint(cmd: list[str], out_dir: Path) -> tuple[subprocess.Popen, str]:
    """`cmd` (a sweep) run until a trial has saved step 10, then sent SIGTERM; the process and its output."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 240
    while not list((out_dir / "trials").glob("*/checkpoints/step=10.ckpt")):
        assert time.time() < deadline and proc.poll() is None, "the first trial never checkpointed"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    return proc, proc.communicate(timeout=120)[0].decode()


@pytest.mark.parametrize("storage", ["sqlite", "journal"])
def test_killed_worker_row_is_rerun_by_the_other_worker(tmp_path, storage):
    """Journal: the heartbeats are files beside the journal (ablate.journal), not rows of a database."""
    sweep = sweep_writer(tmp_path, {"max_steps": 80, "val_every_steps": 40, "num_threads": 1, "val_bleu": False})(
        name="kill",
        out_dir=str(tmp_path / "out"),
        objective={"metric": "val/loss", "direction": "minimize"},
        variants={"base": {}, "A-h1": {"model.heads": 1}, "A-h2": {"model.heads": 2}},
        **({"storage": f"journal://{tmp_path}/shared/study.log"} if storage == "journal" else {}),
    )
    env = {**os.environ, "ABLATE_SWEEP_HEARTBEAT": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ablate.cli", "sweep", str(sweep), "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    db = tmp_path / "shared" / "study.log" if storage == "journal" else tmp_path / "out" / "study.db"
    url = f"journal://{db}" if storage == "journal" else f"sqlite:///{db}"
    deadline = time.time() + 240
    # Both trials are training (their processes write train.log), not just claimed.
    while (
        trial_states(db).count("RUNNING") < 2
        or len(list((tmp_path / "out" / "trials").glob("*/train.log"))) < 2
        or not worker_pids(1, sweep)
    ):
        assert time.time() < deadline and proc.poll() is None, "never had two trials running"
        time.sleep(0.2)
    for pid in worker_pids(1, sweep):
        os.kill(pid, signal.SIGKILL)  # the worker; its trial saves and exits (ablate.sweep.parent_watch)
    out = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 0, out[-3000:]

    from ablate.sweep.storage import make_storage

    trials = optuna.load_study(study_name="kill", storage=make_storage(url)).get_trials()  # still readable
    done = Counter(t.user_attrs["row"] for t in trials if t.state == TrialState.COMPLETE)
    assert done == Counter({"base": 1, "A-h1": 1, "A-h2": 1}), [(t.number, t.state, t.user_attrs) for t in trials]
    killed = [t for t in trials if t.state == TrialState.FAIL and "fail_reason" not in t.user_attrs]
    assert len(killed) == 1 and killed[0].user_attrs["worker"] == 1
    rerun = [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs["row"] == killed[0].user_attrs["row"]]
    assert rerun[0].number > killed[0].number and rerun[0].user_attrs["worker"] == 0
    assert "worker exit codes: [0, -9]" in out
    assert (tmp_path / "out" / "study.db").exists() == (storage == "sqlite")
    if storage == "journal":  # every trial finished, so no heartbeat file is left
        assert [p.name for p in (tmp_path / "shared" / "study.log.heartbeats").iterdir()] == [".now"]


@pytest.mark.parametrize("storage", ["sqlite", "journal"])
def test_a_trial_whose_worker_died_before_its_first_beat_is_failed_and_its_row_run_again(tmp_path, storage):
    """Optuna never calls a trial without any heartbeat stale: every later sweep of the study waited on it, forever
    (ablate.sweep.unbeaten). The dead worker is played by taking the row here and beating nothing."""
    from ablate.sweep.load import load_sweep
    from ablate.sweep.plan import plan_for
    from ablate.sweep.worker import open_sweep_study

    log = tmp_path / "shared" / "study.log"
    path = sweep_writer(tmp_path, {"max_steps": 4, "val_every_steps": 2, "num_threads": 1, "val_bleu": False})(
        name="orphan",
        out_dir=str(tmp_path / "out"),
        objective={"metric": "val/loss", "direction": "minimize"},
        variants={"base": {}},
        **({"storage": f"journal://{log}"} if storage == "journal" else {}),
    )
    sweep = load_sweep(path)
    url = f"journal://{log}" if storage == "journal" else f"sqlite:///{tmp_path / 'out' / 'study.db'}"
    handle, plan = open_sweep_study(sweep, url), plan_for(sweep)
    plan.queue(handle.study)
    assert plan.take(handle).number == 0  # RUNNING, never beaten
    env = {**os.environ, "ABLATE_SWEEP_HEARTBEAT": "1"}
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    states = [(t.number, t.state, t.user_attrs.get("row")) for t in handle.study.get_trials()]
    assert states == [(0, TrialState.FAIL, "base"), (1, TrialState.COMPLETE, "base")], states


def test_a_corrupt_study_database_is_reported_and_left_untouched(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("model: {d_model: 32, heads: 4}\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "c", "base": str(base), "out_dir": str(tmp_path / "out"), "variants": {"base": {}}}))
    db = tmp_path / "out" / "study.db"
    db.parent.mkdir()
    garbage = os.urandom(8192)
    db.write_bytes(garbage)
    proc = subprocess.run([sys.executable, "-m", "ablate.cli", "sweep", str(sweep)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"cannot open the study 'c' at sqlite:///{db}" in proc.stderr and "file is not a database" in proc.stderr
    assert db.read_bytes() == garbage  # nothing the user has is overwritten


def test_sigterm_to_a_sweep_saves_the_running_trial_and_a_rerun_finishes(tmp_path):
    sweep = sweep_writer(tmp_path, {"max_steps": 150, "val_every_steps": 10, "num_threads": 1, "val_bleu": False})(
        name="term",
        out_dir=str(tmp_path / "out"),
        objective={"metric": "val/loss", "direction": "minimize"},
        variants={"base": {}, "A-h1": {"model.heads": 1}},
    )
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(sweep), "--workers", "1"]
    proc, out = stopped_after_its_first_checkpoint(cmd, tmp_path / "out")
    assert "stopped by a signal" in out, out[-3000:]
    db = tmp_path / "out" / "study.db"
    (first,) = [t for t in optuna.load_study(study_name="term", storage=f"sqlite:///{db}").get_trials() if t.state != TrialState.WAITING]
    assert first.state == TrialState.FAIL and first.user_attrs.get("preempted") is True and "fail_reason" not in first.user_attrs
    import torch

    saved = torch.load(Path(first.user_attrs["out_dir"]) / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["global_step"] >= 10  # the trial saved where it stood before exiting

    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    trials = optuna.load_study(study_name="term", storage=f"sqlite:///{db}").get_trials()
    assert Counter(t.user_attrs["row"] for t in trials if t.state == TrialState.COMPLETE) == Counter({"base": 1, "A-h1": 1})
    # The preempted row continued from its checkpoint, in its own run directory, instead of starting over.
    (cont,) = [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs["row"] == first.user_attrs["row"]]
    assert cont.user_attrs["continues"] == first.number and cont.user_attrs["out_dir"] == first.user_attrs["out_dir"]
    with open(Path(first.user_attrs["out_dir"]) / "resume-1" / "metrics.csv") as f:
        steps = [int(r["step"]) for r in csv.DictReader(f) if r.get("train/loss")]
    assert saved["global_step"] <= min(steps) < saved["global_step"] + 5 and max(steps) == 149  # logged every 5 steps
    assert f"continues trial {first.number} from its last checkpoint" in rerun.stderr


def trial_pids(root: Path) -> list[int]:
    """The trial processes (ablate.sweep.trial) training in a run folder under `root` only."""
    return pids_of(lambda cmd: b"ablate.sweep.trial" in cmd and any(arg.startswith(str(root).encode()) for arg in cmd))


def test_a_trial_killed_by_sigkill_fails_and_the_next_run_continues_it_from_its_checkpoint(tmp_path):
    """The OOM killer's SIGKILL ends a trial with no chance to save: it failed, named so, and the next run started the
    row over in a new folder. Its checkpoints are whole (written atomically), so the next run continues from them."""
    sweep = sweep_writer(tmp_path, {"max_steps": 150, "val_every_steps": 10, "num_threads": 1, "val_bleu": False})(
        name="oom", out_dir=str(tmp_path / "out"), objective={"metric": "val/loss", "direction": "minimize"}, variants={"base": {}}
    )
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(sweep)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 240
    while not list((tmp_path / "out" / "trials").glob("*/checkpoints/step=10.ckpt")) or not trial_pids(tmp_path):
        assert time.time() < deadline and proc.poll() is None, "the trial never checkpointed"
        time.sleep(0.02)
    for pid in trial_pids(tmp_path):
        os.kill(pid, signal.SIGKILL)
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 1, out[-3000:]  # its only row failed
    assert "killed by SIGKILL" in out and "the next run continues it from its last checkpoint, if it saved one" in out, out[-3000:]
    db = f"sqlite:///{tmp_path / 'out' / 'study.db'}"
    (first,) = optuna.load_study(study_name="oom", storage=db).get_trials()
    import torch

    from ablate.run import resume_checkpoint

    saved = torch.load(resume_checkpoint(Path(first.user_attrs["out_dir"])), weights_only=True)[
        "global_step"
    ]  # no last.ckpt: no chance to save

    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    assert f"continues trial {first.number} from its last checkpoint" in rerun.stderr
    (cont,) = [t for t in optuna.load_study(study_name="oom", storage=db).get_trials() if t.state == TrialState.COMPLETE]
    assert cont.user_attrs["continues"] == first.number and cont.user_attrs["out_dir"] == first.user_attrs["out_dir"]
    with open(Path(first.user_attrs["out_dir"]) / "resume-1" / "metrics.csv") as f:
        steps = [int(r["step"]) for r in csv.DictReader(f) if r.get("train/loss")]
    assert saved >= 10 and saved <= min(steps) < saved + 5 and max(steps) == 149


def test_a_preempted_grid_point_continues_on_the_rerun_and_the_grid_trains_each_point_once(tmp_path):
    """A search trial stopped by a signal was failed and passed over: the grid counted its point as visited, and the
    rerun trained the other point twice (ablate.sweep.search_plan queues a retry of it now)."""
    sweep = sweep_writer(tmp_path, {"max_steps": 60, "val_every_steps": 10, "num_threads": 1, "val_bleu": False})(
        name="grid",
        out_dir=str(tmp_path / "out"),
        objective={"metric": "val/loss", "direction": "minimize"},
        sampler={"name": "grid"},
        search={"model.heads": {"type": "categorical", "choices": [1, 2]}},
    )
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(sweep), "--workers", "1"]
    proc, out = stopped_after_its_first_checkpoint(cmd, tmp_path / "out")
    assert proc.returncode == 75, out[-3000:]
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    trials = optuna.load_study(study_name="grid", storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}").get_trials()
    done = sorted(t.params["model.heads"] for t in trials if t.state == TrialState.COMPLETE)
    assert done == [1, 2], [(t.number, t.state, t.params) for t in trials]
    (first,) = [t for t in trials if t.state == TrialState.FAIL]
    (cont,) = [t for t in trials if t.system_attrs.get("retry_history") == [first.number]]
    assert cont.state == TrialState.COMPLETE and cont.user_attrs["out_dir"] == first.user_attrs["out_dir"], rerun.stderr[-3000:]
    assert f"continues trial {first.number} from its last checkpoint" in rerun.stderr


def test_a_study_restored_from_an_older_copy_trains_its_rows_again_beside_the_kept_runs(tmp_path):
    """The restored study numbers its new trials as the lost ones were: every trial failed with "out_dir already
    holds a run" (exit 1) until a third run; now they train in NNNN-ROW-2 and the lost trials' folders stay as they were."""
    sweep = sweep_writer(tmp_path, {"max_steps": 4, "val_every_steps": 2, "num_threads": 1, "val_bleu": False})(
        name="restored", out_dir=str(tmp_path / "out"), objective={"metric": "val/loss", "direction": "minimize"}, variants={"A": {}}
    )
    db = tmp_path / "out" / "study.db"
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(sweep)]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    kept = (tmp_path / "out" / "trials" / "0000-A" / "summary.json").read_bytes()
    db.unlink()  # the copy restored held no trial yet (taken before the first run)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    (trial,) = optuna.load_study(study_name="restored", storage=f"sqlite:///{db}").get_trials()
    assert trial.state == TrialState.COMPLETE and Path(trial.user_attrs["out_dir"]).name == "0000-A-2"
    assert (tmp_path / "out" / "trials" / "0000-A" / "summary.json").read_bytes() == kept
