"""`ablate params` and `ablate train` bodies (ablate.run.commands): how a command line becomes configs, members' values
included, refused with the key named when it cannot be."""

from __future__ import annotations

import argparse

import pytest

from ablate.run.commands import member_lists, split_config_args, train_command


def test_files_and_overrides_are_split_and_members_values_taken_from_lists():
    assert split_config_args(["a.yaml", "model.heads=4", "b.yaml"]) == (["a.yaml", "b.yaml"], ["model.heads=4"])
    lists, rest = member_lists(["seeds=[3, 5]", "train.lr_scale=[0.5,1]", "model.heads=4", "model.dropout=0.2"])
    assert lists == {"seed": [3, 5], "train.lr_scale": [0.5, 1]} and rest == ["model.heads=4", "model.dropout=0.2"]
    assert member_lists(["logging.tags=[a, b]"]) == ({}, ["logging.tags=[a, b]"])  # a list key of the schema is no member list


@pytest.mark.parametrize("overrides, members, named", [
    (["seeds=[]"], None, "expected a list of values, one per member"),
    (["seeds=[1, 2]", "train.warmup=[10, 20, 30]"], None, "disagree on the number of members ([2, 3])"),
    (["seeds=[1, 2]"], 3, "disagree on the number of members ([2, 3])"),
    (["model.d_model=[32, 64]"], 2, "model.d_model"),
    (["train.lr_scale=[[1], 2]"], None, "override 'train.lr_scale=[[1], 2]': each member's value must be a single"),
    (["train.lr_scale=[fast, slow]"], None, "override 'train.lr_scale=[...]': members: bad value for 'train.lr_scale'"),
    (["train.warmup=[10, 20]", "train.lr_scale=[1, fast]"], None, "override 'train.lr_scale=[...]': members: bad value"),
    (["train.lr_scale=[1, 2]", "train.warmup=[10, -5]"], None, "override 'train.warmup=[...]': "),
])  # fmt: skip
def test_a_member_command_line_that_cannot_be_is_refused_naming_why(overrides, members, named):
    args = argparse.Namespace(config=overrides, members=members, member_data=None, resume=False, auto_resume=False,
                              force=False, move_aside=False, accept_data_change=False)  # fmt: skip
    with pytest.raises(Exception, match=named.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        train_command(args)
