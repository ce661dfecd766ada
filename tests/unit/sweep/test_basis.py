"""A sweep file's `basis:`: every row is held to it when the file loads, save the rows it excepts."""

from __future__ import annotations

import re

import pytest
from sweep_files import write

from ablate.config import ConfigError
from ablate.sweep.load import load_sweep

HEAD = """
name: demo
base: base.yaml
objective: {metric: val/loss, direction: minimize}
overrides: {train.converge_window: 0.2, train.final_average: 5, train.max_steps: 5000}
"""


def sweep(tmp_path, basis: str, variants: str):
    return load_sweep(write(tmp_path, HEAD + basis + "variants:\n" + variants))


def test_rows_on_the_basis_load_and_the_sweep_carries_it(tmp_path):
    s = sweep(
        tmp_path,
        "basis: {stop: converged, weights: last-5, except: [base-2x]}\n",
        "  base: {}\n  A-h1: {model.heads: 1}\n  D-ls0.0: {train.label_smoothing: 0.0}\n"
        "  base-2x: {train.converge_window: 0.0, train.max_steps: 10000}\n",
    )
    assert (s.basis.stop, s.basis.weights, s.basis.exempt) == ("converged", "last-5", ("base-2x",))
    assert s.basis.describe() == "stop: converged, weights: last-5 (except base-2x)"
    assert sweep(tmp_path, "", "  base: {}\n").basis is None  # optional


STEPS = HEAD.replace("train.converge_window: 0.2, ", "")  # a base that trains for max_steps, no rule


@pytest.mark.parametrize(
    ("head", "basis", "row", "named"),
    [
        # converged: a row that switches the rule off, judges it otherwise, or stops on other terms
        (HEAD, "converged, weights: last-5", "{train.converge_window: 0.0}", "train.converge_window=0 differs from the base's 0.2"),
        (HEAD, "converged, weights: last-5", "{train.converge_tol: 0.05}", "train.converge_tol=0.05 differs from the base's 0.02"),
        (HEAD, "converged, weights: last-5", "{train.max_steps: 500}", "train.max_steps=500 differs from the base's 5000"),
        (HEAD, "converged, weights: last-5", "{train.val_every_steps: 5000}", "train.val_every_steps=5000 differs from the base's 0"),
        (
            HEAD,
            "converged, weights: last-5",
            "{train.early_stop_metric: val/loss}",
            "train.early_stop_metric='val/loss' differs from the base's None",
        ),
        (HEAD, "converged, weights: last-5", "{train.final_average: 3}", "train.final_average=3 but weights: last-5 needs 5"),
        # equal steps: a row with more steps, or a rule of its own
        (STEPS, "steps, weights: last-5", "{train.max_steps: 9000}", "train.max_steps=9000 differs from the base's 5000"),
        (STEPS, "steps, weights: last-5", "{train.max_flops: 1.0e+15}", "train.max_flops=1e+15 differs from the base's None"),
    ],
)
def test_a_row_off_the_basis_is_refused_naming_the_row_and_key(tmp_path, head, basis, row, named):
    with pytest.raises(ConfigError) as e:
        load_sweep(write(tmp_path, head + f"basis: {{stop: {basis}}}\nvariants:\n  base: {{}}\n  X: {row}\n"))
    assert f"variant 'X' is off the study's basis (stop: {basis}): {named}; change it, or list the row under basis.except" in str(e.value)
    assert "sweep.yaml" in str(e.value), str(e.value)


@pytest.mark.parametrize(
    ("head", "basis", "named"),
    [
        (HEAD, "steps, weights: last-5", "stop: steps needs no stopping rule or budget but max_steps"),
        (STEPS, "converged, weights: last-5", "stop: converged needs train.converge_window > 0"),
        (HEAD, "converged, weights: final", "train.final_average=5 but weights: final needs 0"),
        (HEAD, "compute, weights: last-5", "stop: compute needs train.max_flops set"),
        # Converged by its rule, but a FLOPs budget may end it first: two bases at once, so neither is stated.
        (
            HEAD.replace("train.max_steps: 5000", "train.max_steps: 5000, train.max_flops: 1e15"),
            "converged, weights: last-5",
            "stop: converged needs train.converge_window > 0, no other stopping rule or budget",
        ),
    ],
)
def test_a_base_off_its_own_basis_is_refused(tmp_path, head, basis, named):
    with pytest.raises(ConfigError, match="the base experiment is off the study's basis") as e:
        load_sweep(write(tmp_path, head + f"basis: {{stop: {basis}}}\nvariants:\n  base: {{}}\n"))
    assert named in str(e.value), str(e.value)


def test_a_setting_of_a_rule_that_is_off_everywhere_is_no_difference(tmp_path):
    """patience without early stopping ends nothing: a row may carry its own (a shared experiment file, say); with
    the rule on, the same difference is refused."""
    steps = STEPS + "basis: {stop: steps, weights: last-5}\nvariants:\n  base: {}\n"
    assert load_sweep(write(tmp_path, steps + "  X: {train.patience: 9, train.converge_tol: 0.1}\n")).basis.stop == "steps"
    with pytest.raises(ConfigError, match="train.converge_tol=0.1 differs from the base's 0.02"):
        sweep(tmp_path, "basis: {stop: converged, weights: last-5}\n", "  base: {}\n  X: {train.converge_tol: 0.1}\n")


def test_max_time_compares_as_a_duration(tmp_path):
    head = HEAD.replace("train.converge_window: 0.2, ", "train.max_time: 3600, ")
    ok = head + "basis: {stop: time, weights: last-5}\nvariants:\n  base: {}\n  X: {train.max_time: '01:00:00'}\n"
    assert load_sweep(write(tmp_path, ok)).basis.stop == "time"
    with pytest.raises(ConfigError, match="train.max_time='02:00:00' differs from the base's '3600'"):
        load_sweep(write(tmp_path, ok.replace("'01:00:00'", "'02:00:00'")))


def test_equal_compute_rows_share_the_budget(tmp_path):
    head = (
        HEAD.replace("train.max_steps: 5000", "train.max_flops: 1.0e15").replace("converge_window: 0.2", "converge_window: 0.0")
        + "basis: {stop: compute, weights: last-5}\nvariants:\n  base: {}\n"
    )
    with pytest.raises(ConfigError, match=r"variant 'X' .* train.max_flops=2e\+15 differs from the base's 1e\+15"):
        load_sweep(write(tmp_path, head + "  X: {train.max_flops: 2.0e15}\n"))
    assert load_sweep(write(tmp_path, head + "  X: {model.heads: 1}\n")).basis.stop == "compute"


@pytest.mark.parametrize(
    ("basis", "named"),
    [
        ("[converged]", "basis must be a mapping"),
        ("{stop: converge, weights: last-5}", "basis.stop='converge' is not one of"),
        ("{stop: converged, weights: last5}", "basis.weights='last5' is neither 'final' nor 'last-K'"),
        ("{stop: converged, weights: last-5, excepts: [base]}", "unknown key 'excepts' in basis"),
        ("{stop: converged, weights: last-5, except: [nope]}", "basis.except names 'nope', which is not a variant"),
        ("{stop: converged, weights: last-5, except: [base]}", "basis.except cannot list 'base'"),
    ],
)
def test_a_broken_basis_names_the_key(tmp_path, basis, named):
    with pytest.raises(ConfigError) as e:
        sweep(tmp_path, f"basis: {basis}\n", "  base: {}\n")
    assert named in str(e.value), str(e.value)


def test_a_search_is_held_to_the_basis_at_its_bounds(tmp_path):
    text = HEAD + "basis: {stop: converged, weights: last-5}\nn_trials: 2\nsearch:\n"
    assert load_sweep(write(tmp_path, text + "  train.lr_scale: {type: float, low: 0.5, high: 2.0}\n")).basis.stop == "converged"
    with pytest.raises(ConfigError, match="search.'train.converge_tol'=0.01 is off the study's basis .* search another key"):
        load_sweep(write(tmp_path, text + "  train.converge_tol: {type: float, low: 0.01, high: 0.05}\n"))


def test_parse_basis_reads_the_mapping_and_names_what_is_wrong():
    """`ablate.sweep.basis.parse_basis` alone, as load_sweep calls it with the sweep's row names."""
    from ablate.sweep.basis import parse_basis

    assert parse_basis(None, {"base"}) is None
    basis = parse_basis({"stop": "converged", "weights": "last-5", "except": ["base-2x"]}, {"base", "base-2x"})
    assert (basis.stop, basis.weights, basis.exempt) == ("converged", "last-5", ("base-2x",))
    assert basis.describe() == "stop: converged, weights: last-5 (except base-2x)"
    for raw, named in [
        ({"stop": "converged", "weights": "last-0"}, "basis.weights='last-0' is neither 'final' nor 'last-K'"),
        ({"stop": "soon", "weights": "final"}, "basis.stop='soon' is not one of"),
        ({"stop": "steps", "weights": "final", "scope": 1}, "unknown key 'scope' in basis"),
        ({"stop": "steps", "weights": "final", "except": "base-2x"}, "basis.except must be a list of row names"),
        ("converged", "basis must be a mapping"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            parse_basis(raw, {"base", "base-2x"})
