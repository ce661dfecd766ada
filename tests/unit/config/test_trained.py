"""What a run trained, as two runs are compared by it: the model, data and train sections, less where and how a run
ran, with a key added to the schema since counted at its default."""

from __future__ import annotations

from ablate.config.trained import same_value, trained_differences


def test_only_what_was_trained_differs_and_a_key_added_since_counts_at_its_default():
    a = {"model.heads": 8, "train.lr_scale": 1.0, "data.dir": "/a", "train.num_threads": 2, "out_dir": "x", "seed": 1}
    b = {"model.heads": 4, "train.lr_scale": 1.0, "data.dir": "/b", "train.num_threads": 1, "out_dir": "y", "seed": 2}
    assert trained_differences(a, b) == {"model.heads": (8, 4)}  # where it ran, its threads, its folder and seed: not
    assert trained_differences({"model.dropout": 0.1}, {}) == {}  # a run saved before the key: the default (0.1)
    assert trained_differences({"model.dropout": 0.3}, {}) == {"model.dropout": (0.3, 0.1)}
    assert trained_differences({"train.debug_nan_step": 0}, {}) == {}  # retired since: a key that trains nothing now


def test_a_time_budget_spelled_two_ways_trains_alike_for_the_table_and_the_sweep_as_for_a_resume():
    """`ablate table` refused a row whose seeds recorded `max_time` as 3600 (an earlier ablate's base-60 reading of
    `01:00:00`) and as `01:00:00`, and `ablate sweep` named the row as changed, while a resume took them as one."""
    assert trained_differences({"train.max_time": "3600"}, {"train.max_time": "01:00:00"}) == {}
    assert trained_differences({"train.max_time": 3600}, {"train.max_time": "1:00:00"}) == {}
    assert trained_differences({"train.max_time": None}, {"train.max_time": ""}) == {}  # both off
    assert trained_differences({"train.max_time": "3600"}, {"train.max_time": "02:00:00"}) == {"train.max_time": ("3600", "02:00:00")}
    assert trained_differences({"train.max_time": "1:2"}, {"train.max_time": "1:2"}) == {}  # not a budget: as written
    assert same_value("train.warmup", 3600, 3600.0) and not same_value("train.warmup", "3600", "01:00:00")
