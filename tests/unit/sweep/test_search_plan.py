"""A search sweep's plan: a trial interrupted (preempted, its worker died) is retried with its parameters and continues
its checkpoint, a grid point included; at most MAX_RETRY times within a run; one retry trains, a second is refused."""

from __future__ import annotations

import signal

from optuna.trial import TrialState
from sweep_files import write

from ablate.sweep.ledger import fail, is_bookkeeping, tell
from ablate.sweep.load import load_sweep
from ablate.sweep.plan_base import MAX_RETRY
from ablate.sweep.search_plan import Search
from ablate.sweep.worker import open_sweep_study

GRID = "name: g\nbase: base.yaml\nsampler: {name: grid}\nsearch:\n  model.heads: {type: categorical, choices: [1, 2]}\n"


def _grid(tmp_path):
    sweep = load_sweep(write(tmp_path, GRID + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    return handle, Search(sweep)


def _interrupt(handle, plan, trial):
    trial.set_user_attr("out_dir", "somewhere")
    trial.set_user_attr("preempted", True)
    fail(handle.study, trial)  # no reason: stopped by a signal, or its worker died


def test_an_interrupted_grid_point_is_retried_and_trained_not_passed_over(tmp_path):
    handle, plan = _grid(tmp_path)
    first = plan.take(handle)
    heads = plan.claim(handle, first).overrides["model.heads"]
    _interrupt(handle, plan, first)
    assert plan.queue(handle.study) == 1 and plan.queue(handle.study) == 0  # one retry, queued once
    retry = plan.take(handle)
    assert plan.claim(handle, retry).overrides == {"model.heads": heads}
    assert [t.number for t in plan.earlier_attempts(handle, retry)] == [first.number]  # it continues trial 0's run
    tell(handle.study, retry, 1.0)
    other = plan.take(handle)
    assert plan.claim(handle, other).overrides == {"model.heads": 3 - heads}  # the grid's other point, not a repeat
    tell(handle.study, other, 2.0)
    assert plan.next_action(handle.study, 0) == "stop"


def test_an_attempt_chain_is_retried_at_most_max_retry_times_a_run_and_again_by_a_rerun(tmp_path):
    handle, plan = _grid(tmp_path)
    trial = plan.take(handle)
    plan.claim(handle, trial)
    for _ in range(MAX_RETRY):
        _interrupt(handle, plan, trial)
        assert plan.queue(handle.study, only_dead=True) == 1
        trial = plan.take(handle)
        plan.claim(handle, trial)
    _interrupt(handle, plan, trial)  # the third interruption in this run: no retry within it
    assert [t.number for t in plan.earlier_attempts(handle, trial)] == [0, 1]
    assert plan.queue(handle.study, only_dead=True) == 0
    assert plan.queue(handle.study, only_dead=True, since=trial.number) == 1  # a later run counts its own
    (retry,) = handle.study.get_trials(states=(TrialState.WAITING,))
    assert retry.system_attrs["retry_history"] == [0, 1, 2] and retry.params == handle.frozen(trial).params


def test_two_retries_of_one_trial_train_once(tmp_path):
    handle, plan = _grid(tmp_path)
    first = plan.take(handle)
    plan.claim(handle, first)
    _interrupt(handle, plan, first)
    plan.queue(handle.study)
    first_frozen = handle.frozen(first)
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    RetryHeartbeatStaleTrialCallback()(handle.study, first_frozen)  # another worker queued one at the same moment
    a, b = plan.take(handle), plan.take(handle)
    refused = plan.claim(handle, b)  # the later one, even taken first
    assert not isinstance(plan.claim(handle, a), str)
    assert isinstance(refused, str) and refused.endswith(f"trial {first.number} is already retried as trial {a.number}")
    fail(handle.study, b, refused)
    assert is_bookkeeping(handle.frozen(b))


def test_a_run_left_interrupted_holds_its_place_in_the_budget_and_the_rerun_trains_it(tmp_path):
    """Its retries spent in this run, the interrupted point is not replaced by a new draw (a grid trained its other
    point twice); the rerun's retry runs though the budget is otherwise spent."""
    handle, plan = _grid(tmp_path)
    trial = plan.take(handle)
    heads = plan.claim(handle, trial).overrides["model.heads"]
    for _ in range(MAX_RETRY):
        _interrupt(handle, plan, trial)
        plan.queue(handle.study, only_dead=True)
        trial = plan.take(handle)
        plan.claim(handle, trial)
    _interrupt(handle, plan, trial)
    assert plan.queue(handle.study, only_dead=True) == 0 and plan.next_action(handle.study, 0) == "run"
    other = plan.take(handle)
    assert plan.claim(handle, other).overrides == {"model.heads": 3 - heads}
    tell(handle.study, other, 1.0)
    assert plan.next_action(handle.study, 0) == "stop"  # one point finished, the other left for the next run
    assert plan.queue(handle.study) == 1 and plan.next_action(handle.study, 0) == "run"  # the rerun
    retry = plan.take(handle)
    assert plan.claim(handle, retry).overrides == {"model.heads": heads} and plan.claim(handle, retry).name == "trial0"
    tell(handle.study, retry, 2.0)
    assert plan.next_action(handle.study, 0) == "stop"
    assert handle.frozen(retry).user_attrs == {}  # none of the interrupted attempt's own attributes (out_dir, preempted)


def test_a_retry_continues_the_last_attempt_that_made_a_run_folder(tmp_path):
    """Attempt 1 was stopped before it made its folder (a signal while claiming, a worker killed): attempt 2 continues
    attempt 0's run rather than starting over in a new folder."""
    from ablate.sweep.ledger import continued_attempt

    handle, plan = _grid(tmp_path)
    root = tmp_path / "out" / "trials"
    first = plan.take(handle)
    plan.claim(handle, first)
    first.set_user_attr("out_dir", str(root / "0000-trial0"))
    fail(handle.study, first)
    plan.queue(handle.study)
    second = plan.take(handle)
    fail(handle.study, second)  # no out_dir: it never started
    plan.queue(handle.study)
    third = plan.take(handle)
    earlier = plan.earlier_attempts(handle, third)
    assert [t.number for t in earlier] == [0, 1] and continued_attempt(earlier, root).number == 0
    broke = handle.frozen(second)
    broke.user_attrs["fail_reason"] = "FloatingPointError: train/loss is nan"  # failed by itself: nothing to continue
    assert continued_attempt([earlier[0], broke], root) is None


def test_an_attempt_killed_by_a_signal_is_continued_by_the_next_run_and_one_that_failed_by_itself_is_not(tmp_path):
    """The OOM killer's SIGKILL fails a trial, so it is not retried within the run, but what it saved is whole: the
    next run continued nothing and started the row over, to be killed again at the same step, later."""
    from ablate.sweep.ledger import continued_attempt
    from ablate.sweep.trial import record_result

    handle, plan = _grid(tmp_path)
    root = tmp_path / "out" / "trials"
    killed, broke = plan.take(handle), plan.take(handle)
    for trial, name, rc in ((killed, "0000-trial0", -signal.SIGKILL), (broke, "0001-trial1", 1)):
        plan.claim(handle, trial)
        trial.set_user_attr("out_dir", str(root / name))
        (root / name).mkdir(parents=True)
        assert record_result(handle.study, trial, {"val/bleu": 1.0}, root / name, rc) == TrialState.FAIL
    assert continued_attempt([handle.frozen(killed)], root).number == killed.number
    assert continued_attempt([handle.frozen(broke)], root) is None
    assert continued_attempt([handle.frozen(killed), handle.frozen(broke)], root) is None  # a later attempt failed by itself
    # The search retries it on the sweep's next run (not within this one), and the retry continues it.
    assert plan.queue(handle.study, only_dead=True) == 0 and plan.queue(handle.study) == 1 and plan.queue(handle.study) == 0
    retry = plan.take(handle)
    assert handle.frozen(retry).params == handle.frozen(killed).params
    assert continued_attempt(plan.earlier_attempts(handle, retry), root).number == killed.number
    # Finished, the retry is the killed trial's run: the budget counts it once (the grid's 2 points: the broken one and
    # this), and no failure is reported for it (a search trial's retries are its run, as a variants row's seeds).
    from ablate.sweep.failure_report import failed_rows

    retry.set_user_attr("continues", killed.number)
    tell(handle.study, retry, 1.0)
    trials = handle.study.get_trials()
    assert plan._spent(trials) == 2 and plan.next_action(handle.study, 0) == "stop"
    assert [t.number for t in failed_rows(handle.study)[0]] == [broke.number]


def test_seeds_in_a_search_sweep_are_refused_naming_the_line_where_they_were_read_and_never_used(tmp_path):
    import pytest

    with pytest.raises(ValueError, match=r"seeds \(line 6\): a variants sweep's rows are trained once per seed; a search"):
        load_sweep(write(tmp_path, GRID + "seeds: [1, 2]\n"))
    searched = GRID.replace("model.heads:", "seed: {type: categorical, choices: [1, 2]}\n  model.heads:")
    assert set(load_sweep(write(tmp_path, searched)).search) == {"seed", "model.heads"}  # the way to vary it


def test_a_search_plan_shows_each_range_with_its_step_and_scale(tmp_path):
    """`--dry-run` showed `train.warmup: {type: int, low: 200, high: 2000, step: 200}` as int [200, 2000]: the step the
    sampler draws on was not to be seen."""
    space = (
        "search:\n  train.warmup: {type: int, low: 200, high: 2000, step: 200}\n"
        "  train.lr_scale: {type: float, low: 0.5, high: 2.0, log: true}\n  model.heads: {type: categorical, choices: [2, 4]}\n"
    )
    sweep = load_sweep(write(tmp_path, f"name: s\nbase: base.yaml\nn_trials: 2\n{space}out_dir: {tmp_path}/out\n"))
    _, rows, _ = Search(sweep).describe()
    assert rows == [["train.warmup", "int [200, 2000] step 200"], ["train.lr_scale", "float [0.5, 2.0] log"], ["model.heads", "[2, 4]"]]


def test_two_workers_drawing_the_last_trial_of_the_budget_at_once_train_one(tmp_path):
    """Storage review: on a server's study (no claim lock) two workers that both read one trial left both drew one,
    and the search trained more points than n_trials. The later-numbered draw is dropped as bookkeeping."""
    sweep = load_sweep(write(tmp_path, GRID.replace("sampler: {name: grid}", "n_trials: 1") + f"out_dir: {tmp_path}/out\n"))
    handle, plan = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db"), Search(sweep)
    assert plan.next_action(handle.study, 0.0) == "run"
    first, second = plan.take(handle), plan.take(handle)  # each decided before the other drew
    refused = plan.claim(handle, second)
    assert refused == "[not run] budget spent: trials numbered below this one drew all 1 of it"
    assert not isinstance(plan.claim(handle, first), str)
