"""A sweep file's pruner and sampler settings against the Optuna class they build (`ablate.sweep.options`): each
setting Optuna would let through and then misbehave on is an error naming the key."""

from __future__ import annotations

import pytest

from ablate.sweep.components import make_pruner, make_sampler
from ablate.sweep.options import component_problem, is_number, is_seed


def test_numbers_and_seeds_from_yaml():
    assert is_number(3) and is_number(0.5) and not is_number(True) and not is_number("3")
    assert is_seed(0) and not is_seed(-1) and not is_seed(True) and not is_seed(1.0) and not is_seed(2**40)


@pytest.mark.parametrize("spec, problem", [
    ({"name": "median", "n_startup_trials": 5, "n_warmup_steps": 100}, None),
    ({"name": "median", "n_startup": 5}, "pruner 'median' has no setting 'n_startup' (did you mean 'n_startup_trials'?)"),
    ({"name": "median", "interval_steps": True}, "pruner.interval_steps=True must be a number"),
    ({"name": "median", "interval_steps": 0}, "pruner.interval_steps=0 must be >= 1"),
    ({"name": "median", "n_warmup_steps": float("inf")}, "pruner.n_warmup_steps=inf must be finite"),
    ({"name": "median", "n_warmup_steps": 2.5}, "pruner.n_warmup_steps=2.5 must be an integer"),
    ({"name": "hyperband", "reduction_factor": 1}, "pruner.reduction_factor=1 must be >= 2"),
])  # fmt: skip
def test_pruner_settings(spec, problem):
    got = component_problem("pruner", spec, make_pruner)
    assert got is None if problem is None else got.startswith(problem)


def test_sampler_settings():
    build = lambda spec: make_sampler(spec, {})
    assert component_problem("sampler", {"name": "tpe", "n_startup_trials": 3, "seed": 1}, build) is None
    assert component_problem("sampler", {"name": "tpe", "seed": -1}, build).startswith("sampler.seed=-1 must be an integer from 0 to ")
