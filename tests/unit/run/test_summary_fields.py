"""The fields of a run's summary.json that readers rely on: a damaged one is refused naming the field."""

from __future__ import annotations

import math

import pytest

from ablate.run.summary_fields import check_summary

GOOD = {
    "steps": 120,
    "epochs": 1.5,
    "params": {"total": 606208, "encoder": 149952},
    "last": {"val/ppl": 6.4, "val/bleu": 35.4},
    "best": {"metric": "val/loss", "value": None, "checkpoint": "best.ckpt"},
    "convergence": {"improvement": -0.01, "converged": False},
    "speed/tokens_per_s": 15250.0,
    "speed/mfu": None,  # not measured: null passes
    "averaged_from": ["step=10.ckpt"],
    "a_users_field": [1, "x"],  # not listed: passes as it is
    "data": {"dropped": {"train": {"files": ["a.gz"], "pairs": 3}}},
}


def test_a_summary_as_ablate_writes_it_passes():
    check_summary(GOOD, "run")
    check_summary({**GOOD, "params": 606208}, "run")  # a total alone, as runs before the parts were counted had it


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"steps": "abc"}, "summary key 'steps' should be a finite number, got 'abc'"),
        ({"steps": True}, "summary key 'steps' should be a finite number, got True"),  # JSON's true is not a count
        ({"wall_seconds": math.nan}, "summary key 'wall_seconds' should be a finite number, got nan"),
        ({"last": [1, 2]}, "summary key 'last' should be an object, got [1, 2]"),
        ({"last": {"val/bleu": "high"}}, "summary key 'last.val/bleu' should be a finite number, got 'high'"),
        ({"speed/step_ms": {"x": 1}}, "summary key 'speed/step_ms' should be a finite number, got {'x': 1}"),
        ({"params": "big"}, "summary key 'params' should be an object of counts or a finite number, got 'big'"),
        ({"params": {"total": [1]}}, "summary key 'params.total' should be a finite number, got [1]"),
        ({"convergence": {"converged": 1}}, "summary key 'convergence.converged' should be true or false, got 1"),
        ({"sweep": {"row": ["A"]}}, "summary key 'sweep.row' should be a string, got ['A']"),
        ({"averaged_from": "step=10.ckpt"}, "summary key 'averaged_from' should be a list, got 'step=10.ckpt'"),
        ({"data": {"dropped": [1, 2]}}, "summary key 'data.dropped' should be an object, got [1, 2]"),
        ({"data": {"dropped": {"train": [1, 2]}}}, "summary key 'data.dropped.train' should be an object, got [1, 2]"),
        ({"data": {"dropped": {"valid": {"pairs": "x"}}}}, "summary key 'data.dropped.valid.pairs' should be a finite number, got 'x'"),
    ],
)
def test_a_field_of_another_kind_is_named(change, says):
    with pytest.raises(ValueError) as err:
        check_summary({**GOOD, **change}, "trials/0001-base")
    assert str(err.value) == f"trials/0001-base: {says}"


def test_a_summary_that_is_not_an_object_is_named():
    with pytest.raises(ValueError, match=r"^run: a run's summary is a JSON object, not list$"):
        check_summary([1, 2], "run")
