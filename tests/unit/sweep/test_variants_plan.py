"""A variants sweep's plan: a row interrupted (its worker died, preempted) is queued again at most MAX_RETRY times a
run, counted from the run's first trial: interruptions in earlier runs (preemptions on a cluster) use none of them."""

from __future__ import annotations

import pytest
from helpers import offline, run_cli
from optuna.trial import TrialState
from sweep_files import write

from ablate.config import ConfigError
from ablate.sweep.ledger import fail, row_of
from ablate.sweep.load import load_sweep
from ablate.sweep.plan_base import MAX_RETRY
from ablate.sweep.variants_plan import Variants
from ablate.sweep.worker import open_sweep_study

ONE_ROW = "name: v\nbase: base.yaml\nvariants:\n  base: {}\n"


def _interrupted_times(tmp_path, n: int):
    """The row `base`, interrupted n times (each by its own run, as a rerun queues it regardless)."""
    sweep = load_sweep(write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\n"))
    handle, plan = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db"), Variants(sweep)
    for _ in range(n):
        plan.queue(handle.study)
        fail(handle.study, plan.take(handle))
    return handle, plan


def test_a_row_interrupted_in_earlier_runs_is_retried_in_this_one(tmp_path):
    handle, plan = _interrupted_times(tmp_path, MAX_RETRY + 1)
    since = len(handle.study.get_trials())  # this run starts here
    plan.queue(handle.study)
    fail(handle.study, plan.take(handle))  # its worker is killed in this run: the first time in it
    assert plan.queue(handle.study, only_dead=True, since=since) == 1
    (waiting,) = handle.study.get_trials(states=(TrialState.WAITING,))
    assert row_of(waiting) == ("base", None)


def test_a_row_interrupted_more_than_max_retry_times_in_this_run_waits_for_the_next(tmp_path):
    handle, plan = _interrupted_times(tmp_path, MAX_RETRY + 1)
    assert plan.queue(handle.study, only_dead=True, since=0) == 0
    assert plan.queue(handle.study) == 1  # a rerun of the sweep queues it regardless


def test_a_search_budget_in_a_variants_sweep_is_refused_naming_the_key_file_and_line(tmp_path):
    """A timeout stopped the study at its deadline with rows never trained, and the sweep exited 0 saying no trials
    were left; n_trials did nothing. Both are a search's budget."""
    for extra, named in (("timeout: 5\n", ["timeout (line 5)"]), ("n_trials: 2\ntimeout: 5\n", ["n_trials (line 5)", "timeout (line 6)"])):
        path = write(tmp_path, ONE_ROW + extra)
        with pytest.raises(ConfigError) as err:
            load_sweep(path)
        msg = str(err.value)
        assert msg.startswith(f"{path}: ") and "a search's budget" in msg and "variants sweep" in msg, msg
        assert all(word in msg for word in named), msg


def test_n_trials_flag_on_a_variants_sweep_is_a_usage_error(tmp_path, capsys):
    path = write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\n")
    rc, out = run_cli(capsys, "sweep", str(path), "--n-trials", "3", "--dry-run")
    assert rc == 2 and "--n-trials is a search's budget" in out and str(path) in out, out
    assert not (tmp_path / "out").exists()


def test_a_wrong_data_dir_stops_the_sweep_before_any_trial_as_train_would(tmp_path, capsys, monkeypatch):
    """Every trial started and failed on it, leaving FAIL trials in the study, while `ablate train` refused at once."""
    path = write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\n")
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "nope"))
    for dry in (["--dry-run"], []):
        rc, out = run_cli(capsys, "sweep", str(path), *dry)
        assert rc == 2 and f"{path}: the trials' corpus: ABLATE_DATA_DIR={tmp_path / 'nope'} is no folder here" in out, out
        assert not (tmp_path / "out").exists()


def test_a_failed_download_of_the_trials_corpus_leaves_no_study_behind(tmp_path, capsys, monkeypatch):
    """The download came after the study's folder and storage were made: a failed one left an out_dir holding an
    empty study.db. It comes first now; a dry run downloads nothing."""
    tried = offline(monkeypatch)
    path = write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\noverrides: {{data.cache_dir: {tmp_path}/cache}}\n")
    rc, out = run_cli(capsys, "sweep", str(path), "--dry-run")
    assert rc == 0 and not tried and not (tmp_path / "out").exists(), out
    rc, out = run_cli(capsys, "sweep", str(path))
    assert rc == 2 and f"{path}: the trials' corpus: " in out and "failed: offline" in out and len(tried) == 1, out
    assert not (tmp_path / "out").exists()


def test_a_sweep_stopped_before_any_trial_started_does_not_say_trials_saved(tmp_path, monkeypatch):
    """It said "running trials saved a checkpoint and continue from it" when no trial had started."""
    import argparse
    import signal

    from rich.console import Console

    from ablate.sweep import commands
    from ablate.sweep.trial import Stop

    sweep = load_sweep(write(tmp_path, ONE_ROW + f"out_dir: {tmp_path}/out\noverrides: {{logging.wandb: false}}\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    Variants(sweep).queue(handle.study)
    monkeypatch.setattr(Stop, "requested", True)
    monkeypatch.setattr(Stop, "signum", signal.SIGINT)
    args = argparse.Namespace(file=str(tmp_path / "sweep.yaml"), workers=None, trials_per_gpu=None)
    for started in (False, True):
        if started:
            trial = handle.study.ask()  # the queued row, taken by a worker that made its run folder
            trial.set_user_attr("out_dir", str(tmp_path / "out" / "trials" / "0000-base"))
        console = Console(record=True, width=300)
        assert commands._report(sweep, handle.study, handle.url, args, [], 1, 0, console) == 130
        said = console.export_text()
        assert ("running trials saved a checkpoint" in said) is started and ("no trial had started" in said) is not started
