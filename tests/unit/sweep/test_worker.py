"""A sweep worker's loop: what it takes from the study, and what it leaves there."""

from __future__ import annotations

import contextlib
import re
import signal

import optuna
import pytest
from helpers import multi30k_names
from sweep_files import write

from ablate.sweep import worker
from ablate.sweep.ledger import tell, was_interrupted
from ablate.sweep.load import load_sweep
from ablate.sweep.plan import plan_for
from ablate.sweep.trial import Stop

ONE_ROW = "name: demo\nbase: base.yaml\nobjective: {metric: val/bleu, direction: maximize}\nvariants:\n  base: {}\n"


def test_a_worker_that_finds_the_last_row_taken_leaves_no_trial_behind(tmp_path, monkeypatch):
    """Another worker takes (and here also finishes) the last queued row between this worker's look at the queue and
    its turn at the claim lock: this worker must stop, not ask Optuna for a trial that would then fail as
    bookkeeping and show up in optuna-dashboard as a failed trial that never ran."""
    sweep = load_sweep(write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\n"))
    url = f"sqlite:///{tmp_path}/study.db"
    study = worker.open_sweep_study(sweep, url).study
    plan_for(sweep).queue(study)
    taken = []

    @contextlib.contextmanager
    def raced_lock(_url):
        if not taken:
            other = study.ask()  # the other worker
            taken.append(other.number)
            study.tell(other, 1.0)
        yield

    monkeypatch.setattr(worker, "claim_lock", raced_lock)
    worker.run_worker(sweep, url)
    trials = study.get_trials()
    assert taken == [0] and [(t.number, t.state) for t in trials] == [(0, optuna.trial.TrialState.COMPLETE)]


@pytest.fixture
def stop_state(monkeypatch):
    """Stop's class state and the process's signal handlers as they were before the test (run_worker sets both)."""
    for name, value in (("requested", False), ("signum", None), ("child", None)):
        monkeypatch.setattr(Stop, name, value)
    saved = {signum: signal.getsignal(signum) for signum in Stop.SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


GRID = "name: g\nbase: base.yaml\nsampler: {name: grid}\nsearch:\n  model.heads: {type: categorical, choices: [1, 2]}\n"


@pytest.mark.parametrize("body", [ONE_ROW, GRID], ids=["variants", "grid"])
def test_a_signal_while_claiming_starts_no_trial_and_leaves_the_row_for_the_next_run(tmp_path, monkeypatch, stop_state, body):
    """SIGTERM (or the parent watch's) arriving while the worker holds the claim lock: the claimed row must not start
    (nobody may be left to watch it), and it is failed as preempted, so the next run queues it again. (Failed as
    bookkeeping, a grid's draw was lost: the grid counted its point as visited and nothing retried it.)"""
    sweep = load_sweep(write(tmp_path, body + f"out_dir: {tmp_path}/out\n"))
    url = f"sqlite:///{tmp_path}/study.db"
    study = worker.open_sweep_study(sweep, url).study
    plan_for(sweep).queue(study)
    real_lock = worker.claim_lock

    @contextlib.contextmanager
    def signalled_lock(_url):
        with real_lock(_url):
            Stop.handler(signal.SIGTERM, None)
            yield

    monkeypatch.setattr(worker, "claim_lock", signalled_lock)
    monkeypatch.setattr(worker, "run_trial", lambda *a: pytest.fail("a trial started after the signal"))
    worker.run_worker(sweep, url)
    (claimed,) = study.get_trials()
    assert claimed.state == optuna.trial.TrialState.FAIL and was_interrupted(claimed) and claimed.user_attrs["preempted"]
    assert plan_for(sweep).queue(study) == 1  # the next run queues the row (the grid point) again
    (again,) = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert again.system_attrs.get("grid_id") == claimed.system_attrs.get("grid_id")


def test_a_trial_s_wandb_tags_are_the_experiment_s_then_the_row_s_each_once(tmp_path):
    """Row "base" is its own Table 3 group: its tags were ['base', 'base'], and the experiment's own were dropped."""
    sweep = load_sweep(write(tmp_path, ONE_ROW + f"seeds: [1]\nout_dir: {tmp_path}/out\n"))
    (tmp_path / "base.yaml").write_text("model: {d_model: 64, heads: 4, d_ff: 128}\nlogging: {tags: [paper, base]}\n")
    handle = worker.open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    plan = plan_for(sweep)
    plan.queue(handle.study)
    trial = plan.take(handle)
    spec = plan.claim(handle, trial)
    assert spec.tags == ["base", "base", "seed1"]  # what the plan names a trial by: row, group, seed
    from ablate.sweep.trial_config import trial_config

    cfg = trial_config(sweep, trial, spec, tmp_path / "out" / "trials" / "0000-base-s1")
    assert cfg.logging.tags == ["paper", "base", "seed1"]
    assert cfg.members.size == 1  # a trial trained alone is an ordinary run
    grouped = trial_config(sweep, trial, spec, tmp_path / "t", {"members.size": 3, "members.group": "g", "members.index": 2})
    assert (grouped.members.size, grouped.members.group, grouped.members.index) == (3, "g", 2)


def test_a_group_stopped_by_a_stale_heartbeat_leaves_its_other_members_to_continue(tmp_path, monkeypatch, stop_state):
    """One member's trial failed as stale (its machine suspended): launch stops the group, which saves, and raises for
    it. The group's other members must not stay RUNNING until their own heartbeats go stale: they are failed without a
    reason, as a preempted trial is, so a rerun continues them from the group's checkpoint."""
    from optuna.trial import TrialState

    from ablate.sweep.ledger import was_interrupted

    sweep = load_sweep(write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\nseeds: [1, 2]\nmembers: 2\n"))
    url = f"sqlite:///{tmp_path}/study.db"
    study = worker.open_sweep_study(sweep, url).study
    plan_for(sweep).queue(study)
    groups = []

    def stale_group(handle, claimed, *args):
        groups.append([t.number for t, _ in claimed])
        first = claimed[0][0]
        handle.storage.set_trial_state_values(first._trial_id, TrialState.FAIL)  # another worker's fail_stale_trials
        Stop.requested = True  # and then this worker is stopped, so the loop ends here
        raise optuna.exceptions.UpdateFinishedTrialError(f"trial {first.number} is no longer running")

    monkeypatch.setattr(worker, "run_group", stale_group)
    worker.run_worker(sweep, url)
    (numbers,) = groups
    trials = {t.number: t for t in study.get_trials()}
    assert len(numbers) == 2 and all(trials[n].state == TrialState.FAIL for n in numbers)
    assert was_interrupted(trials[numbers[1]])  # no reason of its own: its row continues on the next run


@pytest.mark.parametrize(
    "search, indices",
    [("{type: float, low: 0.1, high: 2.0}", (0, 0)), ("{type: categorical, choices: [0.5, 1.0, 1.5, 2.0]}", (0, 1))],
    ids=["random-two-machines", "grid-two-workers"],
)
def test_workers_sharing_a_seeded_study_draw_distinct_points(tmp_path, monkeypatch, stop_state, search, indices):
    """Two machines each running worker 0, started at the same instant, drew the same points: a worker's stream was
    (its index, the trials at its start). Workers of a seeded grid each held the grid in their own order, so a
    trial's number named a different point in each: points ran twice and others never."""
    name = "random" if "float" in search else "grid"
    body = f"name: r\nbase: base.yaml\nn_trials: 4\nsampler: {{name: {name}, seed: 0}}\nsearch:\n  train.lr_scale: {search}\n"
    sweep = load_sweep(write(tmp_path, body + f"out_dir: {tmp_path}/out\n"))
    grid = optuna.distributions.CategoricalDistribution([0.5, 1.0, 1.5, 2.0])
    space = {"train.lr_scale": grid if name == "grid" else optuna.distributions.FloatDistribution(0.1, 2.0)}
    handles, open_study = [], worker.open_sweep_study
    for index in indices:
        handle = open_study(sweep, f"sqlite:///{tmp_path}/study.db")
        monkeypatch.setattr(worker, "open_sweep_study", lambda *a, handle=handle: handle)
        monkeypatch.setattr(Stop, "requested", True)  # returns before taking a trial
        worker.run_worker(sweep, "unused", index=index)
        handles.append(handle)
    draws = []
    for handle in handles * 2:
        trial = handle.study.ask(space)
        draws.append(trial.params["train.lr_scale"])
        tell(handle.study, trial, 1.0)
    assert len(set(draws)) == 4


@pytest.mark.parametrize("where", ["launch", "write_file"])
def test_a_full_disk_after_trials_started_stops_the_sweep_with_75_and_what_to_do(tmp_path, monkeypatch, capsys, stop_state, where):
    """A study database that could not be written mid-study (its disk full) ended `ablate sweep` with 2, 'a usage or
    sweep file error; nothing started', saying nothing of what to do; the worker had failed the trial as its own
    fault first. Now the trial is left interrupted (the rerun continues it) and the sweep exits 75, saying so. A full
    disk as the trial's folder is prepared (its trial.yaml) was taken for a bad override: the row failed for good."""
    from ablate.cli import main
    from ablate.files.atomic import DiskFull
    from ablate.sweep.ledger import failed_by_itself

    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    monkeypatch.setenv("ABLATE_DATA_DIR", str(multi30k_names(tmp_path / "data")))  # the sweep looks for its corpus first
    path = write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\n")
    db = tmp_path / "out" / "study.db"

    def full(*args, **kwargs):
        raise DiskFull(
            f"disk full: could not write the study database {db} (database or disk is full); the study is as it was before this write"
        )

    monkeypatch.setattr(*((worker.trial_process, "launch") if where == "launch" else (worker, "write_file")), full)
    assert main(["sweep", str(path)]) == 75
    err = capsys.readouterr().err
    assert f"ablate sweep: error: disk full: could not write the study database {db} (database or disk is full)" in err
    assert err.rstrip().endswith(f"; free space, then run the same command to continue: ablate sweep {path}")
    (trial,) = optuna.load_study(study_name="demo", storage=f"sqlite:///{db}").get_trials()
    assert trial.state == optuna.trial.TrialState.FAIL and not failed_by_itself(trial)  # interrupted: the rerun continues it


@pytest.mark.slow  # a whole `ablate` command (seconds): the default set stays under a minute
def test_a_worker_process_stopped_by_a_full_disk_makes_the_sweep_exit_75(tmp_path, monkeypatch, capsys, stop_state):
    """A worker process that met a full disk exits 75 (its own line says why); the sweep it ran in ended 0 with its rows
    left undone. Now it exits 75 and says how to continue."""
    from ablate.cli import main
    from ablate.run import PREEMPTED_EXIT
    from ablate.sweep import commands

    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    monkeypatch.setenv("ABLATE_DATA_DIR", str(multi30k_names(tmp_path / "data")))  # the sweep looks for its corpus first
    path = write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\n")
    monkeypatch.setattr(commands, "launch_workers", lambda *args: [0, PREEMPTED_EXIT])
    assert main(["sweep", str(path), "--workers", "2"]) == 75
    said = f"ablate sweep: warning: worker 1 stopped, as it said; continue: ablate sweep {path} --workers 2"
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("rc, said", [(75, "preempted"), (130, "interrupted")])
def test_a_trial_stopped_by_a_signal_is_said_to_continue_not_to_fail(tmp_path, monkeypatch, capsys, rc, said):
    """The worker said 'trial 0 (base) FAIL after 19 s' of a trial that saved on a signal and continues on the next run."""
    sweep = load_sweep(write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\n"))
    handle = worker.open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    plan_for(sweep).queue(handle.study)
    monkeypatch.setattr(worker.trial_process, "launch", lambda *args, **kwargs: rc)
    assert worker.run_trial(handle, plan_for(sweep).take(handle), sweep, 0) == optuna.trial.TrialState.FAIL
    out = capsys.readouterr()
    # The seconds are the machine's: a loaded one takes more than 0 to open the trial's folder.
    assert re.search(rf"trial 0 \(base\) {said} after \d+ s \(continues on the next run\)", out.out + out.err)
