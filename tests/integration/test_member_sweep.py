"""Sweeps whose rows train as members of one model (ablate.sweep.member_trial): each member is its own trial with
its own state, run directory and W&B run, and `ablate table` reads the study as any other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from ablate.files.wandb_offline import find_runs, read_run
from ablate.run import FAILED_FILE as FAILED
from ablate.sweep.load import load_sweep
from ablate.sweep.member_trial import GROUP_FILE

pytestmark = pytest.mark.slow


def sweep(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ablate.cli", "sweep", str(path), *args], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ))  # fmt: skip


def trials(path: Path) -> list[optuna.trial.FrozenTrial]:
    s = load_sweep(path)
    return optuna.load_study(study_name=s.name, storage=f"sqlite:///{s.out_dir.resolve() / 'study.db'}").get_trials()


def test_each_rows_seeds_train_as_members_each_its_own_trial_run_and_wandb_run(sweep_env):
    tmp, write = sweep_env
    path = write(
        variants={"base": {}, "A-h1": {"model.heads": 1, "members.size": 1}},
        seeds=[1, 2, 3],
        members=2,
        overrides={"logging.wandb": True, "logging.project": "tests"},
    )
    proc = sweep(path, "--members", "3")  # over the file's members and a row's own, in the workers too
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "started as 3 members of one model" in proc.stderr
    ts = trials(path)
    assert Counter((t.user_attrs["row"], t.state) for t in ts) == {("base", TrialState.COMPLETE): 3, ("A-h1", TrialState.COMPLETE): 3}
    groups = {t.user_attrs["members_group"] for t in ts}
    assert len(groups) == 2  # one model per row
    for t in ts:
        out = Path(t.user_attrs["out_dir"])
        summary = json.loads((out / "summary.json").read_text())
        assert summary["members"]["size"] == 3 and summary["members"]["group"] == t.user_attrs["members_group"]
        assert summary["steps"] == 20 and t.value == pytest.approx(summary["last"]["val/bleu"])
        assert json.loads((out / "progress.json").read_text())["step"] == 20  # what the live view and `ablate status` read
        numbers = json.loads((Path(t.user_attrs["members_group"]) / GROUP_FILE).read_text())["numbers"]
        assert t.number in numbers
    seeds = {
        Path(t.user_attrs["out_dir"]).name: json.loads((Path(t.user_attrs["out_dir"]) / "summary.json").read_text())["last"]["val/loss"]
        for t in ts
    }
    assert len(set(seeds.values())) == 6  # six runs, not three copies
    # Each member records its group's schedule: the seed of the group's first member, whose config the group trains on.
    saved = [yaml.safe_load((Path(t.user_attrs["out_dir"]) / "config.yaml").read_text()) for t in ts]
    for group in groups:
        members = [c for c in saved if c["members"]["group"] == group]
        first = next(c for c in members if c["members"]["index"] == 0)
        assert {c["members"]["schedule"] for c in members} == {first["seed"]}
    runs = [read_run(p) for p in find_runs(tmp / "sweep" / "trials")]
    member_runs = {r.name: r for r in runs if r.job_type == "sweep-trial"}
    assert set(member_runs) == {f"{row}-s{s}" for row in ("base", "A-h1") for s in (1, 2, 3)}  # one W&B run per member
    assert all(r.group == "s" and r.config["seed"] == int(name[-1]) and r.history for name, r in member_runs.items())
    from ablate.cli import main

    assert main(["table", str(path), "--out", str(tmp / "tables")]) == 0


def test_a_search_groups_its_draws_and_a_diverged_member_fails_alone(sweep_env):
    tmp, write = sweep_env
    path = write(
        # 1e37 overflows float32 within a few steps on any CPU; at 1e5 whether the loss became NaN was the CPU's rounding
        search={"train.lr_scale": {"type": "categorical", "choices": [1.0, 1e37]}},
        sampler={"name": "grid"},
        members=2,
        objective={"metric": "val/loss", "direction": "minimize"},
    )
    proc = sweep(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ts = sorted(trials(path), key=lambda t: t.params["train.lr_scale"])
    assert [t.state for t in ts] == [TrialState.COMPLETE, TrialState.FAIL]
    assert ts[0].user_attrs["members_group"] == ts[1].user_attrs["members_group"]
    assert "training diverged" in ts[1].user_attrs["fail_reason"] and "is nan at step" in ts[1].user_attrs["fail_reason"]
    assert (Path(ts[1].user_attrs["out_dir"]) / FAILED).exists()


def test_a_search_over_a_key_members_cannot_differ_in_is_refused(sweep_env):
    tmp, write = sweep_env
    path = write(search={"model.d_ff": {"type": "categorical", "choices": [32, 64]}}, n_trials=2)
    proc = sweep(path, "--members", "2")
    assert proc.returncode == 2 and "model.d_ff cannot differ between members" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp / "sweep").exists()  # refused before anything was written


def test_each_member_reports_to_its_own_trial_and_is_pruned_as_its_trial(sweep_env):
    tmp, write = sweep_env
    path = write(
        variants={"a-good": {"train.lr_scale": 2.0}, "b-bad": {"train.lr_scale": 0.0001}},  # queued, so trained, in this order
        seeds=[1, 2],
        members=2,
        objective={"metric": "val/loss", "direction": "minimize"},
        pruner={"name": "median", "n_startup_trials": 2, "n_warmup_steps": 0},
    )
    proc = sweep(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    states = {(t.user_attrs["row"], t.user_attrs["seed"]): t for t in trials(path)}
    assert [states[("a-good", s)].state for s in (1, 2)] == [TrialState.COMPLETE] * 2
    for s in (1, 2):  # worse than the finished trials' median at the first report: each pruned there, on its own trial
        bad = states[("b-bad", s)]
        summary = json.loads((Path(bad.user_attrs["out_dir"]) / "summary.json").read_text())
        assert bad.state == TrialState.PRUNED and summary["stop_reason"] == "pruned" and summary["steps"] == 10
        assert list(bad.intermediate_values) == [10]


def test_a_preempted_group_continues_from_its_checkpoint_as_the_same_runs(sweep_env):
    from fault_injection import fault_plugin

    tmp, write = sweep_env
    whole = write(variants={"base": {}}, seeds=[1, 2], members=2, out_dir=str(tmp / "whole"))
    assert sweep(whole).returncode == 0
    plugin = fault_plugin(tmp / "faults", signal_at="12:TERM")  # the group preempts itself once, at step 12
    path = write(variants={"base": {}}, seeds=[1, 2], members=2, out_dir=str(tmp / "cut"), overrides={"plugins": [str(plugin)]})
    proc = sweep(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "continue as 2 members of one model" in proc.stderr, proc.stderr[-3000:]  # the requeued rows, taken by take_group
    ts = trials(path)
    done = {t.user_attrs["seed"]: t for t in ts if t.state == TrialState.COMPLETE}
    cut = [t for t in ts if t.state == TrialState.FAIL]
    assert sorted(done) == [1, 2] and len(cut) == 2 and all("fail_reason" not in t.user_attrs for t in cut)
    assert {t.user_attrs["out_dir"] for t in cut} == {t.user_attrs["out_dir"] for t in done.values()}  # the same run directories
    uninterrupted = {t.user_attrs["seed"]: t for t in trials(whole)}
    for seed, t in done.items():
        a = json.loads((Path(uninterrupted[seed].user_attrs["out_dir"]) / "summary.json").read_text())
        b = json.loads((Path(t.user_attrs["out_dir"]) / "summary.json").read_text())
        assert a["steps"] == b["steps"] == 20 and a["last"]["val/loss"] == pytest.approx(b["last"]["val/loss"], rel=1e-6)
