"""A sweep's plan: which rows are queued and re-queued, what a search samples, which earlier attempt a rerun continues."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from sweep_files import VARIANTS, write

from ablate.sweep.components import make_pruner, suggest
from ablate.sweep.ledger import tell
from ablate.sweep.load import load_sweep
from ablate.sweep.plan import plan_for
from ablate.sweep.worker import continuable, open_sweep_study


def test_enqueue_rows_is_idempotent_and_only_requeues_dead_rows(tmp_path):
    sweep = load_sweep(write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\n"))
    study = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db").study
    assert plan_for(sweep).queue(study) == 6
    assert plan_for(sweep).queue(study) == 0  # every row is already queued
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert sorted(t.user_attrs["row"] for t in waiting) == sorted(r for r, _ in sweep.rows())
    # A row whose trial died with its worker (no fail_reason) is queued again; one that failed by itself is not.
    died, broke = study.ask(), study.ask()
    study.tell(died, state=optuna.trial.TrialState.FAIL)
    broke.set_user_attr("fail_reason", "FloatingPointError: train/loss is nan")
    study.tell(broke, state=optuna.trial.TrialState.FAIL)
    assert plan_for(sweep).queue(study, only_dead=True) == 1
    assert plan_for(sweep).queue(study) == 1  # re-running the sweep retries the broken row too


@pytest.mark.parametrize("stopped", ["interrupted", "killed"])
def test_a_rerun_continues_interrupted_rows_before_starting_fresh_ones(tmp_path, stopped):
    """Killed by a signal (the OOM killer: failed, continued by a rerun) too: it waited behind every fresh row."""
    sweep = load_sweep(write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    study, plan = handle.study, plan_for(sweep)
    plan.queue(study)
    for _ in range(2):  # base-s1 and base-s2 start; the run is interrupted
        trial = plan.take(handle)
        assert plan.claim(handle, trial).name in ("base-s1", "base-s2")
        if stopped == "killed":
            trial.set_user_attr("killed", True)
            trial.set_user_attr("fail_reason", "killed by SIGKILL (exit code -9)")
        tell(study, trial, state=optuna.trial.TrialState.FAIL)
    assert plan.queue(study) == 2  # the rerun queues both again, behind the four fresh rows of the first run
    taken = []
    while (trial := plan.take(handle)) is not None:
        taken.append(plan.claim(handle, trial).name)
        tell(study, trial, 1.0)
    assert taken == ["base-s1", "base-s2", "A-h1-s1", "A-h1-s2", "E-learned-s1", "E-learned-s2"]
    # Every trial of the study ran a row: none was created and then dropped.
    assert [t.state for t in study.get_trials()].count(optuna.trial.TrialState.COMPLETE) == 6 and len(study.get_trials()) == 8


@pytest.mark.parametrize("sampler", ["tpe", "random", "grid", "cmaes"])
def test_every_sampler_and_pruner_drives_the_search_space(tmp_path, sampler):
    space = (
        "search:\n  train.lr_scale: {type: categorical, choices: [0.5, 1.0]}\n  model.heads: {type: categorical, choices: [2, 4]}\n"
        if sampler == "grid"
        else "search:\n  train.lr_scale: {type: float, low: 0.1, high: 10, log: true}\n  train.warmup: {type: int, low: 10, high: 100, step: 10}\n"
    )
    sweep = load_sweep(
        write(tmp_path, f"name: s\nbase: base.yaml\nout_dir: {tmp_path}/s\nn_trials: 4\nsampler: {{name: {sampler}, seed: 0}}\n{space}")
    )
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    study = handle.study
    for pruner in ("none", "median", "successive_halving", "hyperband"):
        assert (
            make_pruner(load_sweep(write(tmp_path, f"name: s\nbase: base.yaml\nn_trials: 1\npruner: {pruner}\n{space}")).pruner) is not None
        )
    seen = []
    for _ in range(4):
        trial = study.ask()
        params = plan_for(sweep).claim(handle, trial).overrides
        sweep.config_for(params)  # every sample is a valid config
        seen.append(tuple(params.values()))
        tell(study, trial, sum(float(v) for v in params.values()))
    if sampler == "grid":
        assert plan_for(sweep).budget() == 4
        assert sorted(seen) == [(0.5, 2), (0.5, 4), (1.0, 2), (1.0, 4)]  # the grid, each point once
    else:
        assert all(0.1 <= lr <= 10 and warmup % 10 == 0 for lr, warmup in seen) and len(set(seen)) == 4


def _attempt_dir(root: Path, name: str, step: int | None) -> Path:
    """A trial's run directory as a killed attempt leaves it: a readable checkpoint at `step`, or none."""
    import torch

    run = root / name
    (run / "checkpoints").mkdir(parents=True)
    if step is not None:
        torch.save(
            {"state_dict": {}, "hyper_parameters": {}, "global_step": step, "optimizer_states": [{}]}, run / "checkpoints" / "last.ckpt"
        )
    return run


@pytest.mark.slow  # real sweeps rerun: seconds; the default set stays under a minute
@pytest.mark.parametrize("case", ["died after a checkpoint", "failed by itself", "died before a checkpoint"])
@pytest.mark.parametrize("mode", ["variants", "search"])
def test_a_rerun_continues_only_an_attempt_that_died_with_a_checkpoint(tmp_path, mode, case):
    """The retry of a row (variants) or of a trial re-queued by Optuna's retry callback (search) continues the
    earlier attempt only if that one stopped with no reason of its own and left a readable checkpoint."""
    text = (
        VARIANTS
        if mode == "variants"
        else "name: s\nbase: base.yaml\nn_trials: 4\nsearch:\n  train.warmup: {type: int, low: 10, high: 100}\n"
    )
    sweep = load_sweep(write(tmp_path, text + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    study = handle.study
    root = (sweep.out_dir / "trials").resolve()
    if mode == "variants":
        plan_for(sweep).queue(study)
    first = study.ask()
    first.set_user_attr("out_dir", str(_attempt_dir(root, "0000-first", None if case == "died before a checkpoint" else 12)))
    if case == "failed by itself":
        first.set_user_attr("fail_reason", "FloatingPointError: train/loss is nan")
    study.tell(first, state=optuna.trial.TrialState.FAIL)
    failed = handle.frozen(first)
    if mode == "variants":
        plan_for(sweep).queue(study)  # re-queues the failed row (a re-run of the sweep)
        row = failed.system_attrs["fixed_params"]
        while True:  # take queued trials until the failed row's
            again = study.ask()
            if handle.frozen(again).system_attrs.get("fixed_params") == row:
                break
            study.tell(again, state=optuna.trial.TrialState.FAIL)
            again = None
    else:
        optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=2)(study, failed)
        again = study.ask()
    found = continuable(plan_for(sweep).earlier_attempts(handle, again), root)
    assert (found.number if found else None) == (first.number if case == "died after a checkpoint" else None)


def test_a_row_with_members_is_taken_with_its_other_seeds_and_never_with_another_row(tmp_path):
    from ablate.sweep.ledger import row_of

    body = "name: demo\nbase: base.yaml\nvariants:\n  base: {}\n  A-h1: {model.heads: 1, model.d_k: 64, model.d_v: 64}\nseeds: [1, 2, 3]\nmembers: 2\n"
    sweep = load_sweep(write(tmp_path, body + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    plan = plan_for(sweep)
    plan.queue(handle.study)
    groups = []
    while (first := plan.take(handle)) is not None:
        size = plan.members(handle, first)
        partners = plan.take_partners(handle, first, size - 1)
        groups.append([row_of(handle.frozen(t)) for t in [first, *partners]])
    assert groups == [[("base", 1), ("base", 2)], [("base", 3)], [("A-h1", 1), ("A-h1", 2)], [("A-h1", 3)]]


def test_a_search_with_members_draws_its_partners_within_the_budget(tmp_path):
    body = "name: s\nbase: base.yaml\nsearch:\n  train.lr_scale: {type: float, low: 0.5, high: 2}\nn_trials: 3\nmembers: 2\nsampler: {name: random, seed: 0}\n"
    sweep = load_sweep(write(tmp_path, body + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    plan = plan_for(sweep)
    first = plan.take(handle)
    assert plan.members(handle, first) == 2 and len(plan.take_partners(handle, first, 1)) == 1
    third = plan.take(handle)
    assert plan.take_partners(handle, third, 1) == []  # 3 trials in all: the budget has none left for a partner


def test_a_search_whose_choices_changed_since_the_study_began_says_which_and_how_to_continue():
    """A study begun when `1e-1` in a file was text holds ['1e-1', '3e-1']; the same file now reads [0.1, 0.3], and
    Optuna's own refusal ("dynamic value space") said neither what changed nor what to do."""
    study = optuna.create_study()
    trial = study.ask()
    suggest(trial, "train.lr_scale", {"type": "categorical", "choices": ["1e-1", "3e-1"]})
    study.tell(trial, 1.0)
    with pytest.raises(ValueError) as e:
        suggest(study.ask(), "train.lr_scale", {"type": "categorical", "choices": [0.1, 0.3]})
    assert "search.'train.lr_scale': the study holds the choices ['1e-1', '3e-1'], the sweep file [0.1, 0.3]" in str(e.value)
    assert "quoted: '1e-3'" in str(e.value)
