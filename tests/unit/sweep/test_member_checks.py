"""`ablate sweep`'s checks that a study's rows can train as the members it asks for (ablate.sweep.member_checks),
once `--members` is applied: refused before any trial, naming the row or key; the flag can ungroup a file."""

from __future__ import annotations

import pytest
from sweep_files import write

from ablate.cli import main
from ablate.sweep.load import load_sweep
from ablate.sweep.member_checks import few_groups_note, members_problem


def test_a_file_that_asks_for_no_members_has_no_members_problem(tmp_path):
    path = write(tmp_path, "name: demo\nbase: base.yaml\nvariants:\n  base: {}\nseeds: [1, 2]\noverrides: {train.accumulate: 2}\n")
    sweep = load_sweep(path)
    assert members_problem(sweep) is None
    sweep.set_members(2, force=True)
    assert "train.accumulate must be 1 with members" in members_problem(sweep)


@pytest.mark.parametrize("text, named", [
    ("members: 2\noverrides: {train.accumulate: 2}\n", "variant 'base': members: train.accumulate must be 1 with members"),
    ("variants:\n  base: {}\n  fp16: {members.size: 3, train.precision: 16-mixed}\n", "variant 'fp16': members: train.precision=16-mixed"),
    ("members: 2\ngpus_per_trial: 2\n", "variant 'base': members: gpus_per_trial 2 cannot be combined with members"),
])  # fmt: skip
def test_a_setting_members_cannot_train_with_is_refused_before_the_study_naming_the_row(tmp_path, capsys, text, named):
    head = "name: demo\nbase: base.yaml\nseeds: [1, 2, 3]\n" + ("" if "variants" in text else "variants:\n  base: {}\n")
    path = write(tmp_path, head + text)
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert f"{path}: {named}" in capsys.readouterr().err
    assert main(["sweep", str(path), "--dry-run", "--members", "1"]) == 0  # the flag overrides the file's members


def test_a_search_over_a_key_members_cannot_differ_in_is_refused_unless_the_flag_ungroups_it(tmp_path, capsys):
    path = write(
        tmp_path, "name: demo\nbase: base.yaml\nsearch:\n  model.d_ff: {type: categorical, choices: [32, 64]}\nn_trials: 2\nmembers: 2\n"
    )
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert "members: search key model.d_ff cannot differ between members" in capsys.readouterr().err
    assert main(["sweep", str(path), "--dry-run", "--members", "1"]) == 0


def test_a_row_of_one_seed_trains_alone_whatever_its_members_size(tmp_path, capsys):
    path = write(tmp_path, "name: demo\nbase: base.yaml\nvariants:\n  base: {members.size: 3, train.accumulate: 2}\nseeds: [1]\n")
    assert main(["sweep", str(path), "--dry-run"]) == 0, capsys.readouterr().err


def test_members_from_the_flag_are_checked_against_the_rows_settings(tmp_path, capsys):
    path = write(tmp_path, "name: demo\nbase: base.yaml\nvariants:\n  base: {}\nseeds: [1, 2]\noverrides: {train.accumulate: 2}\n")
    assert main(["sweep", str(path), "--members", "2", "--dry-run"]) == 2
    assert "--members: variant 'base': members: train.accumulate must be 1 with members" in capsys.readouterr().err


def test_rows_left_in_fewer_than_four_groups_are_named_with_their_groups(tmp_path):
    """A row's seeds in one group get no seed interval from `ablate table` (a group counts once), so the sweep says so
    before it trains, naming each such row; members that leave every row 4 groups, or none, say nothing."""
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
    body = "name: demo\nbase: base.yaml\nvariants:\n  base: {}\nseeds: [1, 2, 3, 4]\nmembers: 4\n"
    assert main(["sweep", str(write(tmp_path, body + f"out_dir: {tmp_path}/out\n")), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "note: members: base (4 seeds in as few as 1 group of 4)" in out and "gets no seed interval" in out


def test_a_plugins_variant_without_a_member_axis_is_refused_before_the_study_naming_the_row(tmp_path, capsys):
    """docs/variants.md's LogDistance has a parameter and no `members` argument: a sweep asking its row for members
    passed its dry run and trained the base's group, and then every group of that row failed once its data had
    loaded. It is refused before the study, naming the row and the variant; the row alone, or no members, runs."""
    (tmp_path / "own.py").write_text(
        "import torch\n"
        "from ablate.model.positional import POSITIONAL, RelativePosition\n"
        "from ablate.registry import register\n\n"
        "@register(POSITIONAL, 'log_distance_mc')\n"
        "class LogDistance(RelativePosition):\n"
        "    adds_bias = True\n\n"
        "    def __init__(self, *, heads, d_k, max_positions, causal):\n"
        "        super().__init__(heads=heads, d_k=d_k, max_positions=max_positions, causal=causal)\n"
        "        self.weight = torch.nn.Parameter(torch.ones(heads, 1, 1))\n\n"
        "    def bias(self, q, q_pos, k_pos, scale):\n"
        "        return -self.weight * torch.log1p((q_pos[:, None] - k_pos[None, :]).abs().float()).to(q.dtype)\n"
    )
    body = "name: demo\nbase: base.yaml\nseeds: [1, 2]\noverrides: {plugins: [own.py]}\nvariants:\n  base: {}\n  E-log: {model.positional: log_distance_mc}\n"
    path = write(tmp_path, body + "members: 2\n")
    assert main(["sweep", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: variant 'E-log': model.positional=log_distance_mc has parameters but takes no `members` argument" in err
    assert main(["sweep", str(path), "--dry-run", "--members", "1"]) == 0
    capsys.readouterr()
    alone = body.replace(
        "  E-log: {model.positional: log_distance_mc}\n", "  E-log: {model.positional: log_distance_mc, members.size: 1}\n"
    )
    assert main(["sweep", str(write(tmp_path, alone + "members: 2\n")), "--dry-run"]) == 0, capsys.readouterr().err
