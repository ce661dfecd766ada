"""Which runs may train together as members (`ablate.config.members.member_values`): the member keys' values one per
member, and a group that differs anywhere else refused naming the key."""

from __future__ import annotations

import re

import pytest

from ablate.config import ConfigError
from ablate.config.members import MEMBER_KEYS, member_values
from ablate.experiment import load_config


def configs(*overrides: list[str]):
    return [load_config(overrides=o) for o in overrides]


def test_members_may_differ_in_their_own_keys_and_bookkeeping():
    group = configs(["seed=1", "model.dropout=0.1", "out_dir=runs/a"], ["seed=2", "model.dropout=0.3", "out_dir=runs/b"])
    values = member_values(group)
    assert list(values) == list(MEMBER_KEYS)
    assert values["seed"] == [1, 2] and values["model.dropout"] == [0.1, 0.3]
    assert values["train.label_smoothing"] == [group[0].train.label_smoothing] * 2


@pytest.mark.parametrize("group, named", [
    ([["model.d_model=128"], ["model.d_model=256"]], "members: model.d_model differs between members (128 vs 256)"),
    ([["train.precision=16-mixed"], ["train.precision=16-mixed", "seed=2"]], "train.precision=16-mixed scales the loss"),
    ([["train.accumulate=2"], ["train.accumulate=2", "seed=2"]], "train.accumulate must be 1 with members"),
    ([], "a group needs at least one run"),
])  # fmt: skip
def test_a_group_that_cannot_train_together_is_refused_naming_the_key(group, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        member_values(configs(*group))


def test_one_run_alone_may_use_any_precision():
    (cfg,) = configs(["train.precision=16-mixed"])
    assert member_values([cfg])["seed"] == [cfg.seed]


def test_member_configs_give_each_member_its_seed_values_and_own_run_directory():
    from ablate.config.members import member_configs

    (group,) = configs(["members.size=3", "out_dir=runs/g", "seed=7"])
    members = member_configs(group, {"train.lr_scale": [0.5, 1, 2]})
    assert [m.seed for m in members] == [7, 8, 9]
    assert [m.train.lr_scale for m in members] == [0.5, 1.0, 2.0]
    assert [m.out_dir for m in members] == ["runs/g/seed=7,lr_scale=0.5", "runs/g/seed=8,lr_scale=1.0", "runs/g/seed=9,lr_scale=2.0"]
    assert [(m.members.group, m.members.index, m.members.size) for m in members] == [("runs/g", k, 3) for k in range(3)]
    assert members[1].logging.name == "g/seed=8,lr_scale=1.0" and members[1].logging.group == "g"
    listed = member_configs(group, {"seed": [3, 1, 2]})  # a value the members share is left out of the names
    assert [m.out_dir for m in listed] == ["runs/g/seed=3", "runs/g/seed=1", "runs/g/seed=2"]
    # Every member records the group's schedule, the group config's seed, whatever its own seed is.
    assert {m.members.schedule for m in members} == {7} and {m.members.schedule for m in listed} == {7}


@pytest.mark.parametrize("values, named", [
    ({"model.d_model": [32, 64, 128]}, "members: model.d_model cannot differ between members"),
    ({"train.warmup": [10, 20]}, "members: train.warmup lists 2 values for members.size=3"),
    ({"seed": [1, 1, 2]}, "two members would train the same run (seed=1, seed=1, seed=2)"),
    ({"train.lr_scale": ["fast", 1, 2]}, "lr_scale"),
])  # fmt: skip
def test_member_configs_refuse_what_members_cannot_be(values, named):
    from ablate.config.members import member_configs

    (group,) = configs(["members.size=3"])
    with pytest.raises(ConfigError, match=re.escape(named)):
        member_configs(group, values)
