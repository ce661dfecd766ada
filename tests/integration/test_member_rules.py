"""Each member stops and reports as its own run would (ablate.run.members): max_flops is each member's budget, the
convergence report is each member's own, the final weights' validation after training judges no member and prunes
none, and the group's checkpoint holds what every callback made of a validation."""

from __future__ import annotations

import csv
from pathlib import Path

import lightning
import pytest
from helpers import write_experiment

from ablate.config import to_dict
from ablate.config.members import member_configs
from ablate.experiment import from_dict, load_config
from ablate.run import member_runs
from ablate.run.members import train_members
from ablate.run.stopping import convergence_report
from ablate.run.train import train
from ablate.sweep.pruning import MemberPruning

pytestmark = pytest.mark.slow  # groups and runs train


def _group(path: Path, *overrides: str, values: dict | None = None):
    cfg = load_config([path], ["members.size=2", *overrides])
    return cfg, [from_dict(to_dict(m)) for m in member_configs(cfg, values)]


def _val_ppl(run: str) -> list[float]:
    with open(Path(run) / "metrics.csv") as f:
        return [float(row["val/ppl"]) for row in csv.DictReader(f) if row.get("val/ppl")]


def test_max_flops_is_each_members_own_budget(tmp_path):
    path = write_experiment(tmp_path, "exp", max_steps=40, val_every_steps=40)
    budget = train(load_config([path], [f"out_dir={tmp_path / 'alone'}", "seed=1", "train.max_steps=10"]))["flops"]
    cfg, members = _group(path, f"train.max_flops={budget}")
    for summary in train_members(cfg, members):  # a member's share of the group's FLOPs: about its run's 10 steps
        assert summary["stop_reason"] == "max_flops" and 8 <= summary["steps"] <= 11, summary["steps"]
        assert budget <= summary["flops"] < 1.2 * budget


def test_a_member_that_stops_early_reports_what_it_had_spent_not_the_groups_totals(tmp_path):
    path = write_experiment(tmp_path, "exp", max_steps=40, val_every_steps=5)
    # member 1 barely moves, so early stopping ends it at its second validation; member 0 trains all 40 steps
    cfg, members = _group(path, "train.early_stop_metric=val/loss", "train.patience=1", "train.min_delta=0.01",
                          values={"train.lr_scale": [1.0, 1e-9]})  # fmt: skip
    full, early = train_members(cfg, members)
    assert early["stop_reason"] == "early_stopping" and early["steps"] < full["steps"] == 40, (early["steps"], full["steps"])
    # its FLOPs are its own steps' (the same batch shapes as its partner's, step by step), not the group's 40 steps'
    assert early["flops"] == pytest.approx(full["flops"] * early["steps"] / full["steps"], rel=0.25), (early["flops"], full["flops"])
    assert early["wall_seconds"] < full["wall_seconds"]


def test_each_member_reports_its_own_convergence(tmp_path):
    path = write_experiment(tmp_path, "exp", max_steps=30, val_every_steps=2)
    cfg, members = _group(path, values={"train.lr_scale": [0.5, 4.0]})
    summaries = train_members(cfg, members)
    for member, summary in zip(members, summaries):
        own = _val_ppl(member.out_dir)
        assert len(own) == 15 and summary["convergence"] == convergence_report(own, 0.0, cfg.train.converge_tol)
    assert summaries[0]["convergence"]["improvement"] != summaries[1]["convergence"]["improvement"]


def test_the_final_weights_validation_judges_no_member_as_it_judges_no_run(tmp_path):
    """Early stopping that any second validation fires (min_delta 1: a loss would have to fall below 0): the one
    validation during training sets the best, and the final weights' validation after training (step 14, off the grid)
    counts for no rule, for a run or a member."""
    path = write_experiment(tmp_path, "exp", max_steps=14, val_every_steps=10, early_stop_metric="val/loss", patience=1, min_delta=1.0)
    alone = train(load_config([path], [f"out_dir={tmp_path / 'alone'}", "seed=1"]))
    cfg, members = _group(path)
    summaries = train_members(cfg, members)
    assert alone["stop_reason"] == "max_steps" and alone["steps"] == 14
    for member, summary in zip(members, summaries):
        assert summary["stop_reason"] == "max_steps" and summary["steps"] == 14
        assert summary["last"]["val/ppl"] == pytest.approx(_val_ppl(member.out_dir)[-1])  # the final weights' validation


class _Trial:
    """An Optuna trial's side that pruning calls: its pruner would prune at step 14 and after."""

    def __init__(self):
        self.steps: list[int] = []

    def report(self, value: float, step: int) -> None:
        self.steps.append(step)

    def should_prune(self) -> bool:
        return self.steps[-1] >= 14


def test_a_member_that_trained_all_its_steps_is_not_pruned_at_its_final_validation(tmp_path):
    path = write_experiment(tmp_path, "exp", max_steps=14, val_every_steps=10)
    cfg, members = _group(path)
    trials = [_Trial(), _Trial()]
    summaries = train_members(cfg, members, member_callbacks=[lambda runs: MemberPruning(trials, "val/loss", runs)])
    assert [t.steps for t in trials] == [[10, 14], [10, 14]]  # the final validation is reported to each trial
    for member, summary in zip(members, summaries):
        assert summary["stop_reason"] == "max_steps"
        assert summary["last"]["val/ppl"] == pytest.approx(_val_ppl(member.out_dir)[-1])


def test_the_group_checkpoint_holds_what_every_callback_made_of_a_validation(tmp_path, monkeypatch):
    """A pruner that stops member 1 at the first validation acts before the group's checkpoint of it is saved: a group
    killed after that save resumes with member 1 still stopped."""
    path = write_experiment(tmp_path, "exp", max_steps=20, val_every_steps=10)
    cfg, members = _group(path)
    seen, saved = {}, []

    class PruneMember1(lightning.Callback):
        def __init__(self, runs):
            seen["runs"] = runs

        def on_validation_end(self, trainer, pl_module):
            if trainer.global_step == 10 and not trainer.sanity_checking:
                seen["runs"].stop(1, "pruned", trainer, pl_module)

    save = member_runs.GroupCheckpoint.on_validation_end

    def saving(self, trainer, pl_module):
        if not trainer.sanity_checking:
            saved.append((trainer.global_step, list(seen["runs"].stops.reason)))
        save(self, trainer, pl_module)

    monkeypatch.setattr(member_runs.GroupCheckpoint, "on_validation_end", saving)
    summaries = train_members(cfg, members, member_callbacks=[PruneMember1])
    assert saved[0] == (10, [None, "pruned"])
    assert summaries[1]["stop_reason"] == "pruned" and summaries[1]["steps"] == 10 and summaries[0]["steps"] == 20


def test_one_members_failure_at_its_end_costs_the_others_nothing(tmp_path, monkeypatch):
    from ablate.run import members as members_module

    path = write_experiment(tmp_path, "exp", max_steps=4, val_every_steps=4)
    cfg, members = _group(path)
    select = members_module.select_weights

    def fails_for_member_0(cfg, judge, own, dm, out):
        if out == Path(members[0].out_dir):
            raise OSError("disk went away")
        return select(cfg, judge, own, dm, out)

    monkeypatch.setattr(members_module, "select_weights", fails_for_member_0)
    with pytest.raises(OSError, match="disk went away"):
        train_members(cfg, members)
    assert not (Path(members[0].out_dir) / "summary.json").exists()
    assert (Path(members[1].out_dir) / "summary.json").is_file()
