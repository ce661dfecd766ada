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


def _trimmed_after_a_stop(tmp_path):
    """A sweep of rows base, A-h1, E-learned with seeds 1 and 2, all queued, stopped; the file then keeps seed 1 and
    drops E-learned."""
    from sweep_files import VARIANTS

    path = write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\n")
    handle = open_sweep_study(load_sweep(path), f"sqlite:///{tmp_path}/study.db")
    assert Variants(load_sweep(path)).queue(handle.study) == 6
    path.write_text(path.read_text().replace("seeds: [1, 2]", "seeds: [1]").replace("  E-learned: {model.positional: learned}\n", ""))
    return handle, Variants(load_sweep(path))


def test_rows_and_seeds_trimmed_from_the_file_while_queued_are_not_trained_nor_counted_as_failures(tmp_path, caplog):
    """Storage review: a queued seed since removed from `seeds` was trained (and tabulated), and a removed row was
    failed with a reason of its own, so every later run warned of failed runs."""
    from ablate.sweep.ledger import failed_by_itself

    handle, plan = _trimmed_after_a_stop(tmp_path)
    assert plan.queue(handle.study) == 0
    said = "not trained, though an earlier run queued them: A-h1 seed 2, E-learned seed 1, E-learned seed 2, base seed 2"
    assert said in caplog.text
    taken = []
    while (trial := plan.take(handle)) is not None:
        spec = plan.claim(handle, trial)
        if isinstance(spec, str):
            fail(handle.study, trial, spec)
        else:
            taken.append(spec.name)
            handle.study.tell(trial, 1.0)
    assert sorted(taken) == ["A-h1-s1", "base-s1"]
    failed = [t for t in handle.study.get_trials() if t.state == TrialState.FAIL]
    assert len(failed) == 4 and not any(failed_by_itself(t) for t in failed)
    reasons = sorted(t.user_attrs["fail_reason"] for t in failed)
    assert sum("[not run] row 'E-learned' was queued but is no longer in" in r for r in reasons) == 2
    assert any("[not run] row 'A-h1' seed 2 was queued but is no longer in" in r for r in reasons)


@pytest.mark.parametrize("first", ["failed by itself", "interrupted", "killed", "pruned"])
def test_a_row_queued_twice_by_two_sweeps_starting_at_once_is_trained_once(tmp_path, first):
    """Storage review: two `ablate sweep` started together both queued every row; a row that failed by itself (NaN)
    or was pruned was then trained again by its twin, in the same run. An interrupted or killed one is continued."""
    import time

    from sweep_files import VARIANTS

    sweep = load_sweep(write(tmp_path, VARIANTS.replace("seeds: [1, 2]", "seeds: [1]") + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    plan = Variants(sweep)
    plan.queue(handle.study)
    twin = {"row": "base", "seed": 1}  # queued by the other sweep, at the same moment
    handle.study.enqueue_trial(twin, user_attrs={**twin, "queued_at": time.time()})
    trial = plan.take(handle, lambda key: key[0] == "base")
    assert plan.claim(handle, trial).name == "base-s1"
    if first == "pruned":
        handle.study.tell(trial, state=TrialState.PRUNED)
    else:
        if first == "killed":
            trial.set_user_attr("killed", True)
        if first != "interrupted":
            trial.set_user_attr("fail_reason", "FloatingPointError: train/loss is nan at step 9")
        handle.study.tell(trial, state=TrialState.FAIL)
    again = plan.take(handle, lambda key: key[0] == "base")
    spec = plan.claim(handle, again)
    if first in ("failed by itself", "pruned"):
        assert isinstance(spec, str) and spec.startswith("[not run] duplicate: row base (seed 1) is already")
    else:
        assert spec.name == "base-s1"
    rerun = Variants(sweep)  # the user runs the sweep again later: a row that failed by itself is trained again
    if first == "failed by itself":
        fail(handle.study, again, spec)
        assert rerun.queue(handle.study) == 1
        assert rerun.claim(handle, rerun.take(handle, lambda key: key[0] == "base")).name == "base-s1"
