"""Which trials a worker trains together (ablate.sweep.member_group): an interrupted group's rows again, in member
order, to continue from its checkpoint; otherwise fresh partners of the row."""

from __future__ import annotations

import json

from sweep_files import write

from ablate.sweep.ledger import fail, row_of
from ablate.sweep.load import load_sweep
from ablate.sweep.member_group import claim_group, take_group
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


def test_rows_left_in_fewer_than_four_groups_are_named_with_their_groups(tmp_path):
    """A row's seeds in one group get no seed interval from `ablate table` (a group counts once), so the sweep says so
    before it trains, naming each such row; members that leave every row 4 groups, or none, say nothing."""
    from ablate.sweep.member_group import few_groups_note

    body = "name: demo\nbase: base.yaml\nvariants:\n  base: {}\n  other: {members.size: 1}\nseeds: [1, 2, 3, 4, 5, 6, 7, 8]\n"
    for k, members in enumerate(("members: 3\n", "members: 2\n", "")):
        (tmp_path / str(k)).mkdir()
        note = few_groups_note(load_sweep(write(tmp_path / str(k), body + members)))
        if k == 0:
            assert note.startswith("members: base (8 seeds in as few as 3 groups of 3).") and "other" not in note
            assert "a row in 1 group gets no seed interval" in note
        else:  # 4 groups of 2; seeds as runs
            assert note is None


def test_the_dry_run_names_rows_left_in_few_groups(tmp_path, capsys):
    from ablate.cli import main

    body = "name: demo\nbase: base.yaml\nvariants:\n  base: {}\nseeds: [1, 2, 3, 4]\nmembers: 4\n"
    assert main(["sweep", str(write(tmp_path, body + f"out_dir: {tmp_path}/out\n")), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "note: members: base (4 seeds in as few as 1 group of 4)" in out and "gets no seed interval" in out
