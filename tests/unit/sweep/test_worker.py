"""A sweep worker's loop: what it takes from the study, and what it leaves there."""

from __future__ import annotations

import contextlib

import optuna
from sweep_files import write

from ablate.sweep import worker
from ablate.sweep.load import load_sweep
from ablate.sweep.plan import plan_for

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
