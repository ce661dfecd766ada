"""A sweep file's search space (ablate.sweep.search_space): a spec Optuna cannot draw from is refused naming the file
and the key, by every command that reads the file (`ablate status` and `archive` too, which check no trial)."""

from __future__ import annotations

import pytest
from sweep_files import write

from ablate.config import ConfigError
from ablate.sweep.load import load_sweep
from ablate.sweep.search_space import probes, search_override


@pytest.mark.parametrize(
    "choices, said",
    [
        ("4", "needs a non-empty 'choices' list, e.g. choices: [1, 2, 4]; got 4"),  # was a TypeError
        ("{a: 1}", "needs a non-empty 'choices' list, e.g. choices: [1, 2, 4]; got {'a': 1}"),  # was a KeyError
        ("'24'", "needs a non-empty 'choices' list, e.g. choices: [1, 2, 4]; got '24'"),  # drawn letter by letter
        ("[]", "needs a non-empty 'choices' list"),
        ("[2, [4]]", "search.'model.heads'.choices: [4] is not a single value"),
        ("[2, {a: 1}]", "search.'model.heads'.choices: {'a': 1} is not a single value"),
        ("[2, 4, 2]", "search.'model.heads'.choices lists 2 twice; list each choice once"),  # drawn twice as often
        ("[2, 4, 2.0]", "search.'model.heads'.choices lists 2.0 twice"),  # one value to a config
    ],
)
def test_categorical_choices_that_are_not_a_list_of_values_are_named(tmp_path, choices, said):
    body = f"name: d\nbase: base.yaml\nn_trials: 2\nsearch:\n  model.heads: {{type: categorical, choices: {choices}}}\n"
    for to_run in (True, False):  # the dry run, and `ablate status` / `archive`, which read the file to find the study
        with pytest.raises(ConfigError) as e:
            load_sweep(write(tmp_path, body), to_run=to_run)
        assert str(e.value).startswith(f"{tmp_path / 'sweep.yaml'}: search.'model.heads'") and said in str(e.value)


def test_probes_are_every_choice_and_both_bounds_and_an_int_draw_is_an_int():
    assert probes({"type": "categorical", "choices": [1, "a", None]}) == [1, "a", None]
    assert probes({"type": "float", "low": 0.5, "high": 2}) == [0.5, 2]
    assert search_override("model.heads", {"type": "int"}, 4.0) == {"model.heads": 4}
    # With a step the top is the grid's last value, as Optuna draws it: heads 6 (not dividing d_model 64) is never drawn.
    assert probes({"type": "int", "low": 1, "high": 6, "step": 3}) == [1, 4]
    assert probes({"type": "float", "low": 0.1, "high": 0.5, "step": 0.2}) == pytest.approx([0.1, 0.5])


def test_a_top_bound_off_the_steps_grid_is_not_refused_as_it_is_never_drawn(tmp_path):
    search = "  model.heads: {type: int, low: 1, high: 6, step: 3}\n"
    assert load_sweep(write(tmp_path, f"name: d\nbase: base.yaml\nn_trials: 2\nsearch:\n{search}")).search


@pytest.mark.parametrize(
    "search, said",
    [
        (
            "model.heads: {type: categorical, choices: [2, a]}",
            "search.'model.heads'='a': overrides: bad value for 'model.heads': 'a' is not a whole number",
        ),
        ("model.heads: {type: categorical, choices: [2, 3]}", "search.'model.heads'=3: invalid config:"),
        ("model.dropout: {type: float, low: 0.1, high: 1.5}", "search.'model.dropout'=1.5: invalid config:"),
    ],
)
def test_every_choice_and_both_bounds_are_composed_before_any_trial(tmp_path, search, said):
    """Only the first choice (and `low`) was: `choices: [2, a]` passed the dry run, and a trial drawing 'a' failed."""
    with pytest.raises(ConfigError) as e:
        load_sweep(write(tmp_path, f"name: d\nbase: base.yaml\nn_trials: 2\nsearch:\n  {search}\n"))
    assert str(e.value).startswith(f"{tmp_path / 'sweep.yaml'}: {said}"), str(e.value)


def test_a_value_that_runs_beside_another_searched_keys_value_is_not_refused(tmp_path):
    """heads 3 does not divide the base's d_model 64, but a trial drawing d_model 48 with it runs."""
    search = "  model.heads: {type: categorical, choices: [4, 3]}\n  model.d_model: {type: categorical, choices: [64, 48]}\n"
    sweep = load_sweep(write(tmp_path, f"name: d\nbase: base.yaml\nn_trials: 2\nsearch:\n{search}"))
    assert sweep.search["model.heads"]["choices"] == [4, 3]
