"""with_leaves sets a row's keys on a composed base exactly as composing the row in full would, or declines."""

from __future__ import annotations

import math

import pytest

from ablate.config import to_dict
from ablate.config.compose import compose
from ablate.config.leaves import with_leaves

BASE = {"model": {"d_model": 64, "heads": 4, "d_ff": 128}, "train": {"max_steps": 10}}

# Values of every kind a sweep row gives, onto fields of each type in the schema; each as OmegaConf converts it.
SAME = [
    {"model.heads": 2},
    {"model.heads": "2"},  # text for an int
    {"model.dropout": 0},  # an int for a float
    {"model.dropout": "0.25"},
    {"train.lr_scale": "1e-3"},
    {"train.val_bleu": "false"},
    {"train.val_bleu": "yes"},
    {"train.val_bleu": 0},
    {"model.d_k": None},  # int | None
    {"model.d_k": 32, "model.d_v": "32"},
    {"model.positional": "learned"},
    {"model.positional": 5},  # a number for text
    {"train.max_time": None},
    {"seed": 7, "out_dir": "elsewhere"},  # top-level keys
    {"train.lr_scale": 0.5, "model.heads": 8, "data.max_len": 20},  # three sections at once
]

DECLINED = [
    {"model.nope": 1},  # unknown key: the full composition names it
    {"model": {"heads": 2}},  # a section
    {"train.betas": [0.9, 0.99]},  # a list
    {"logging.tags": ["a"]},
    {"model.heads": "four"},  # refused by its node: the full composition's error names the key
    {"model.heads": [1]},
    {"model.heads": None},  # not optional
    {"model.positional": "${model.attention}"},  # an interpolation
    {"model.positional": "???"},
    {"model.heads.x": 1},
    {"train.debug_nan_step": 3},  # a retired key, which the full composition drops with a warning
]


@pytest.mark.parametrize("dotted", SAME, ids=lambda d: ",".join(f"{k}={v!r}" for k, v in d.items()))
def test_a_rows_leaves_set_on_the_base_equal_the_row_composed_in_full(dotted):
    base = compose(**BASE)
    got = with_leaves(base, dotted)
    assert got is not None
    assert to_dict(got) == to_dict(_full(dotted))
    assert to_dict(base) == to_dict(compose(**BASE)), "the base itself was changed"


@pytest.mark.parametrize("dotted", DECLINED, ids=lambda d: ",".join(f"{k}={v!r}" for k, v in d.items()))
def test_what_it_cannot_set_exactly_is_left_to_the_full_composition(dotted):
    assert with_leaves(compose(**BASE), dotted) is None


def test_a_value_is_converted_as_omegaconf_does_and_the_copy_shares_only_what_it_leaves():
    base = compose(**BASE)
    got = with_leaves(base, {"model.dropout": 1})
    assert isinstance(got.model.dropout, float) and math.isclose(got.model.dropout, 1.0)
    assert got.model is not base.model and got.train is base.train and base.model.dropout != 1.0


def _full(dotted: dict):
    sections: dict = {k: dict(v) for k, v in BASE.items()}
    for key, value in dotted.items():
        *path, leaf = key.split(".")
        node = sections
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return compose(**sections)
