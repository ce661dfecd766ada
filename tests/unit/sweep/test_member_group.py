"""Which trials a worker trains together (ablate.sweep.member_group): an interrupted group's rows again, in member
order, to continue from its checkpoint; otherwise fresh partners of the row."""

from __future__ import annotations

import json
import os

import pytest
import torch
from sweep_files import write

from ablate.sweep.ledger import fail, row_of
from ablate.sweep.load import load_sweep
from ablate.sweep.member_group import claim_group, other_grouping, take_group
from ablate.sweep.member_trial import GROUP_FILE
from ablate.sweep.plan import plan_for
from ablate.sweep.worker import open_sweep_study

BODY = "name: demo\nbase: base.yaml\nvariants:\n  base: {}\nseeds: [1, 2, 3]\nmembers: 2\n"


def _study(tmp_path):
    sweep = load_sweep(write(tmp_path, BODY + f"out_dir: {tmp_path}/out\n"))
    handle = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db")
    plan_for(sweep).queue(handle.study)
    return sweep, handle, plan_for(sweep), (tmp_path / "out" / "trials").resolve()


def _interrupted_group(tmp_path, handle, plan, root, checkpoint: bool):
    """Seeds 2 and 1 (in that member order) trained as a group that was preempted: both failed without a reason."""
    first = plan.take(handle, lambda key: key == ("base", 2))
    second = plan.take(handle, lambda key: key == ("base", 1))
    group = tmp_path / "out" / "groups" / f"{first.number:04d}-base"
    (group / "checkpoints").mkdir(parents=True)
    if checkpoint:
        (group / "checkpoints" / "last.ckpt").write_bytes(b"x")
    (group / GROUP_FILE).write_text(json.dumps({"numbers": [first.number, second.number]}))
    for t in (first, second):
        t.set_user_attr("members_group", str(group))
        t.set_user_attr("out_dir", str(root / f"{t.number:04d}-base"))
        fail(handle.study, t)
    plan.queue(handle.study, only_dead=True)
    return group


def test_an_interrupted_group_is_taken_again_whole_in_member_order(tmp_path):
    sweep, handle, plan, root = _study(tmp_path)
    group = _interrupted_group(tmp_path, handle, plan, root, checkpoint=True)
    trial = plan.take(handle)  # interrupted rows first: seed 1 or 2
    resume, ordered = take_group(handle, plan, trial, root)
    assert resume is not None and resume[0] == group
    assert [row_of(handle.frozen(t)) for t in ordered] == [("base", 2), ("base", 1)]  # member 0 is seed 2, as before
    assert [d.name for d in resume[1]] == ["0001-base", "0000-base"]  # each continues in its own run directory (seed 2 was #1)
    assert [spec.seed for _, spec in claim_group(handle, ordered, sweep)] == [2, 1]


def test_a_group_that_left_no_checkpoint_starts_afresh_with_the_rows_partners(tmp_path):
    sweep, handle, plan, root = _study(tmp_path)
    _interrupted_group(tmp_path, handle, plan, root, checkpoint=False)
    trial = plan.take(handle)
    resume, partners = take_group(handle, plan, trial, root)
    assert resume is None and len(partners) == 1 and row_of(handle.frozen(partners[0]))[0] == "base"


def test_a_group_that_cannot_re_form_leaves_no_row_it_took_behind(tmp_path):
    """The old group's process still holds its folder (saving as its worker died): the rows taken to re-form it train
    in a fresh group; none is left RUNNING outside the worker's list (it was never beaten, nor trained)."""
    from optuna.trial import TrialState

    from ablate.run.run_lock import lock_run_dir

    sweep, handle, plan, root = _study(tmp_path)
    group = _interrupted_group(tmp_path, handle, plan, root, checkpoint=True)
    held = lock_run_dir(group)
    trial = plan.take(handle, lambda key: key == ("base", 1))  # member 1: member 0's row (seed 2) is taken first
    resume, partners = take_group(handle, plan, trial, root)
    taken = {t.number for t in [trial, *partners]}
    running = {t.number for t in handle.study.get_trials() if t.state == TrialState.RUNNING}
    assert resume is None and running == taken and len(taken) == 2, (running, taken)
    os.close(held)


def test_an_interrupted_attempt_in_the_other_grouping_is_named_not_passed_over(tmp_path):
    """`ablate sweep --members 2` after a plain run was interrupted (or the reverse) trained the row from step 0 and
    said nothing; the worker now says which attempt it does not continue, and, where --members changed, how to."""
    sweep, handle, plan, root = _study(tmp_path)
    group = _interrupted_group(tmp_path, handle, plan, root, checkpoint=True)
    again = plan.take(handle)
    earlier = plan.earlier_attempts(handle, again)
    note = other_grouping(earlier, root, True, 2)  # asked of a new group: the old one did not re-form (a search's retry)
    assert note == (
        f"trial {max(t.number for t in earlier)} was interrupted training as a member of the group {group}, which does not "
        f"re-form here, so this trains from the start ({group}/checkpoints/last.ckpt is kept)"
    )
    note = other_grouping(earlier, root, False, 2)
    assert note.startswith(f"trial {max(t.number for t in earlier)} was interrupted training as a member of the group {group}")
    assert "so from the start" in note and "--members changed" not in note  # no attempt recorded what it was asked
    alone = plan.take(handle, lambda key: key == ("base", 3))
    alone.set_user_attr("out_dir", str(root / f"{alone.number:04d}-base"))
    alone.set_user_attr("members_asked", 1)
    fail(handle.study, alone)
    plan.queue(handle.study, only_dead=True)
    retry = plan.take(handle, lambda key: key == ("base", 3))
    earlier = plan.earlier_attempts(handle, retry)
    assert other_grouping(earlier, root, True, 2) is None  # its folder holds no checkpoint to continue: nothing lost
    (root / f"{alone.number:04d}-base" / "checkpoints").mkdir(parents=True)
    ckpt = {"state_dict": {}, "hyper_parameters": {}, "global_step": 3, "optimizer_states": [{"state": {}}]}
    torch.save(ckpt, root / f"{alone.number:04d}-base" / "checkpoints" / "last.ckpt")
    assert other_grouping(earlier, root, False, 1) is None
    note = other_grouping(earlier, root, True, 2)
    assert note.startswith(f"trial {alone.number} was interrupted training alone and this trains as a member, so from the start")
    assert note.endswith("--members changed since (1, now 2): rerun the sweep with --members 1 to continue it")
    assert "--members changed" not in other_grouping(earlier, root, True, 1)  # a seed left alone before, grouped now


def test_a_full_disk_while_a_group_is_prepared_is_no_rows_fault(tmp_path, monkeypatch):
    """A full disk writing a member's trial.yaml was taken for a bad sampled override: every row of the group failed
    for good. It goes up to the worker, which leaves them to continue on the next run (test_worker says how)."""
    from ablate.files.atomic import DiskFull
    from ablate.sweep import member_group
    from ablate.sweep.ledger import failed_by_itself

    sweep, handle, plan, root = _study(tmp_path)
    taken = [plan.take(handle, lambda key, seed=seed: key == ("base", seed)) for seed in (1, 2)]
    claimed = claim_group(handle, taken, sweep)

    def full(path, *args, **kwargs):
        raise DiskFull(f"disk full: could not write {path}")

    monkeypatch.setattr(member_group, "write_file", full)
    with pytest.raises(DiskFull):
        member_group.run_group(handle, claimed, sweep, 0)
    assert not any(failed_by_itself(handle.frozen(t)) for t in taken)


@pytest.mark.parametrize("ended", [1, 2, "diverged"])
def test_a_group_killed_during_its_members_ends_fails_every_member_as_killed_so_the_group_re_forms(tmp_path, ended):
    """SIGKILL after member 0's summary was written: member 0 was recorded COMPLETE, so the group could not re-form and
    member 1, trained to the end in the group's checkpoint, trained again from the start, alone. Every member is now
    failed as killed and the group continues whole; killed after every end was written, each member is complete."""
    from optuna.trial import TrialState

    from ablate.sweep.member_trial import record_group

    sweep, handle, plan, root = _study(tmp_path)
    trials = [plan.take(handle, lambda key, s=s: key == ("base", s)) for s in (1, 2)]
    dirs = [root / f"{t.number:04d}-base" for t in trials]
    group = tmp_path / "out" / "groups" / f"{trials[0].number:04d}-base"
    (group / "checkpoints").mkdir(parents=True)
    (group / "checkpoints" / "last.ckpt").write_bytes(b"x")
    (group / GROUP_FILE).write_text(json.dumps({"numbers": [t.number for t in trials]}))
    for t, d in zip(trials, dirs):
        d.mkdir(parents=True)
        t.set_user_attr("members_group", str(group))
        t.set_user_attr("out_dir", str(d))
    for d in dirs[: 1 if ended == "diverged" else ended]:
        (d / "summary.json").write_text('{"last": {"val/bleu": 10.0}}')
    if ended == "diverged":  # member 1 diverged in training: its end is its FAILED.txt, and every end was written
        (dirs[1] / "FAILED.txt").write_text("non-finite weights at step 5\n")
    states = record_group(handle.study, trials, {"val/bleu": 1.0}, dirs, group, -9)
    if ended != 1:
        assert states == [TrialState.COMPLETE, TrialState.COMPLETE if ended == 2 else TrialState.FAIL]
        assert not any(handle.frozen(t).user_attrs.get("killed") for t in trials)
        return
    assert states == [TrialState.FAIL, TrialState.FAIL] and all(handle.frozen(t).user_attrs["killed"] for t in trials)
    plan.queue(handle.study)  # the sweep's next run
    resume, ordered = take_group(handle, plan, plan.take(handle, lambda key: key[1] in (1, 2)), root)
    assert resume is not None and resume[0] == group and [row_of(handle.frozen(t)) for t in ordered] == [("base", 1), ("base", 2)]


def test_a_plugins_error_in_a_member_groups_trial_is_said_with_its_file_and_line(tmp_path, monkeypatch, capsys):
    """The review of the plugin fixes: a member group's process still left a bare traceback."""
    import json
    from types import SimpleNamespace

    from ablate import plugins
    from ablate.sweep import member_trial

    plugin = tmp_path / "mine.py"
    plugin.write_text("def forward(q):\n    b, h, t = q\n")
    monkeypatch.setattr(plugins, "_imported", {})
    module = plugins.import_plugin(str(plugin))
    (tmp_path / member_trial.GROUP_FILE).write_text(json.dumps({"numbers": [1, 2], "trials": ["a.yaml", "b.yaml"]}))
    monkeypatch.setattr("ablate.sweep.parent_watch.watch_parent", lambda *a: None)
    cfg = SimpleNamespace(members=SimpleNamespace(index=0))
    monkeypatch.setattr("ablate.experiment.load_config", lambda files: cfg)
    monkeypatch.setattr("ablate.config.members.member_values", lambda configs: None)
    monkeypatch.setattr("dataclasses.replace", lambda obj, **kw: obj)
    monkeypatch.delenv("ABLATE_TRIAL_NUMBER", raising=False)
    monkeypatch.setattr("ablate.run.members.train_members", lambda *a, **k: module.forward((1, 2)))
    assert member_trial.main([str(tmp_path)]) == 1
    assert capsys.readouterr().err.endswith(f"at {plugin}, line 2, in forward: b, h, t = q\n")
