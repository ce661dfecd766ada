"""A schema field's value as OmegaConf's node for its annotation makes it, without building a structured config."""

from __future__ import annotations

import pytest

from ablate.config.field_types import REFUSED, hints, node_value
from ablate.config.schema import ModelConfig, TrainConfig


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        ("4", int, 4),
        (1, float, 1.0),
        ("yes", bool, True),
        (None, int | None, None),
        (7, str, "7"),
        (None, int, REFUSED),
        ("abc", int, REFUSED),
        (True, float, REFUSED),
        ([1], int, REFUSED),
        ({"a": 1}, str, REFUSED),
        (1.0, list[float], REFUSED),  # a list names no scalar node
        ("${model.heads}", int, REFUSED),  # stored unchecked by the node, fails once read
        ("???", str, REFUSED),
    ],
)
def test_a_value_is_what_its_fields_node_makes_of_it(value, kind, expected):
    assert node_value(value, kind) == expected if expected is not REFUSED else node_value(value, kind) is REFUSED


def test_hints_are_the_schemas_resolved_annotations():
    assert hints(ModelConfig)["kv_heads"] == int | None
    assert hints(TrainConfig)["betas"] == list[float]
