"""Issue 32 item 4: processes of a sweep whose parent died. `kill -9` of `ablate sweep --workers 2` left its workers and
their trials running: they finished their rows and started new ones with nobody watching. And a trial whose worker was
killed died with it by SIGKILL (PDEATHSIG), saving nothing. Now each worker and each trial watches the process that
started it and, when it is gone, stops as on SIGTERM: the trial saves last.ckpt at its next step boundary and exits,
the worker records it and takes no new row. Processes are found by a /proc scan (Linux only, as these tests are;
the watch itself polls os.getppid(), which macOS has too, but it is untested there)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import torch
from helpers import sweep_writer, trial_states
from optuna.trial import TrialState

pytestmark = [
    pytest.mark.slow,  # a real sweep: two workers, two training trials
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds processes through /proc"),
]
TRAIN = {"max_steps": 100_000, "val_every_steps": 100_000, "log_every_steps": 5, "num_threads": 1, "val_bleu": False}
ROWS = {"base": {}, "A-h1": {"model.heads": 1}, "A-h2": {"model.heads": 2}, "A-h8": {"model.heads": 8}}


def processes(tmp_path: Path) -> dict[int, list[str]]:
    """pid -> argv of every live process whose command line names a path under tmp_path (this test's sweep file, its
    trials' trial.yaml): this sweep's workers and trials, and no other test's."""
    mark = f"{tmp_path}/"
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            argv = [a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        if any(a.startswith(mark) for a in argv):  # a zombie's cmdline is empty: reaped or not, it runs nothing
            found[int(proc.name)] = argv
    return found


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def kill_all(tmp_path: Path) -> None:
    for pid in processes(tmp_path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def start(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """`ablate sweep --workers 2` over four long rows, output to TMP/sweep.log; waits until two trials train (their
    progress.json is written at training start, after the trial's SIGTERM handler is in place)."""
    sweep = sweep_writer(tmp_path, TRAIN)(
        name="orphans", out_dir=str(tmp_path / "out"), objective={"metric": "val/loss", "direction": "minimize"}, variants=ROWS
    )
    env = {**os.environ, "ABLATE_SWEEP_HEARTBEAT": "1", "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline"}
    with open(tmp_path / "sweep.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ablate.cli", "sweep", str(sweep), "--workers", "2"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.time() + 300
    while len(training(tmp_path)) < 2 or trial_states(tmp_path / "out" / "study.db").count("RUNNING") < 2:
        if time.time() > deadline or proc.poll() is not None:
            kill_all(tmp_path)
            pytest.fail("the sweep never had two trials training:\n" + (tmp_path / "sweep.log").read_text()[-3000:])
        time.sleep(0.2)
    return proc, sweep


def training(tmp_path: Path) -> list[Path]:
    return sorted(d for d in (tmp_path / "out" / "trials").glob("*") if (d / "progress.json").exists())


def wait_gone(tmp_path: Path, pids, seconds: float = 60) -> list[int]:
    """The pids still alive (and of this sweep) after up to `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        left = [p for p in pids if p in processes(tmp_path)]
        if not left:
            return []
        time.sleep(0.2)
    return left


def assert_saved_at_a_step(trial_dir: Path) -> None:
    """last.ckpt written by the trial's preemption save (validation, which also writes it, never comes in TRAIN)."""
    log = (trial_dir / "train.log").read_text()
    assert "stopped by a preemption signal" in log, log[-2000:]
    assert not list(trial_dir.glob("checkpoints/step=*.ckpt"))
    saved = torch.load(trial_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert saved["global_step"] > 0


def test_kill_9_of_the_sweep_ends_its_workers_and_trials_which_save_and_start_no_row(tmp_path):
    proc, _ = start(tmp_path)
    try:
        running = training(tmp_path)
        before = sorted((tmp_path / "out" / "trials").iterdir())
        alive = processes(tmp_path)
        assert sum("ablate.sweep.worker" in argv for argv in alive.values()) == 2, alive
        assert sum("ablate.sweep.trial" in argv for argv in alive.values()) == 2, alive
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        left = wait_gone(tmp_path, alive, 60)
        assert not left, f"still running 60 s after the sweep was killed: {[processes(tmp_path).get(p) for p in left]}"
    finally:
        kill_all(tmp_path)
    assert sorted((tmp_path / "out" / "trials").iterdir()) == before  # no row started after the kill
    for trial_dir in running:
        assert_saved_at_a_step(trial_dir)
    trials = optuna.load_study(study_name="orphans", storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}").get_trials()
    stopped = [t for t in trials if t.state == TrialState.FAIL]
    # Each worker recorded its trial as preempted (its row continues on the next run) and took no other row.
    assert sorted(Path(t.user_attrs["out_dir"]) for t in stopped) == running
    assert all(t.user_attrs.get("preempted") is True and "fail_reason" not in t.user_attrs for t in stopped)
    assert [t.state for t in trials].count(TrialState.WAITING) == len(ROWS) - 2


def test_a_trial_whose_worker_is_killed_saves_and_exits(tmp_path):
    """The trial's own watch: its worker gone by SIGKILL (no handler of the worker's runs), the trial saves and exits."""
    proc, _ = start(tmp_path)
    try:
        alive = processes(tmp_path)
        trials = {pid: argv for pid, argv in alive.items() if "ablate.sweep.trial" in argv}
        pid, argv = next(iter(trials.items()))
        worker = parent_of(pid)
        assert "ablate.sweep.worker" in alive[worker], alive
        trial_dir = Path(next(a for a in argv if a.endswith("trial.yaml"))).parent
        os.kill(worker, signal.SIGKILL)
        left = wait_gone(tmp_path, [pid], 60)
        assert not left, f"the trial of the killed worker still runs 60 s later: {argv}"
        assert_saved_at_a_step(trial_dir)
        assert proc.poll() is None  # the sweep and its other worker go on
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kill_all(tmp_path)
