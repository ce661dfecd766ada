"""A model section against the registries (`ablate.model.checks.model_problems`): unknown names with the hint,
kernels that cannot add a positional scheme's biases, and training sequences longer than the positions cover."""

from __future__ import annotations

from dataclasses import replace

from ablate.config import DataConfig, ModelConfig
from ablate.model import ATTENTION, POSITIONAL, compatible, compatible_positionals
from ablate.model.checks import model_problems


def test_the_default_model_has_no_problem():
    assert model_problems(ModelConfig(), DataConfig()) == []


def test_an_unknown_kernel_is_named_with_a_hint():
    (problem,) = model_problems(replace(ModelConfig(), attention="scaled_dot_prodcut"), DataConfig())
    assert "model.attention" in problem and "scaled_dot_prodcut" in problem and "did you mean 'scaled_dot_product'" in problem


def test_a_kernel_that_cannot_add_a_schemes_biases_is_refused_naming_both_and_the_choices():
    pairs = [(a, p) for a in sorted(ATTENTION) for p in sorted(POSITIONAL) if not compatible(a, p)]
    assert pairs, "every kernel takes every scheme: this test has nothing to check"
    attention, positional = pairs[0]
    (problem,) = model_problems(replace(ModelConfig(), attention=attention, positional=positional), DataConfig())
    assert f"model.attention='{attention}' cannot add the position biases of model.positional='{positional}'" in problem
    assert str(compatible_positionals(attention)) in problem


def test_sequences_longer_than_learned_positions_are_refused():
    model = replace(ModelConfig(), positional="learned", max_positions=64)
    assert model_problems(model, replace(DataConfig(), max_len=64)) == []
    (problem,) = model_problems(model, replace(DataConfig(), max_len=65))
    assert problem.startswith("data.max_len=65 exceeds model.max_positions=64")


def test_batches_padded_past_learned_positions_are_refused_naming_pad_multiple():
    """collate rounds a batch's length up to data.pad_multiple: max_len 30 at a multiple of 8 makes batches of 32."""
    model = replace(ModelConfig(), positional="learned", max_positions=30)
    assert model_problems(model, replace(DataConfig(), max_len=30, pad_multiple=1)) == []
    assert model_problems(replace(model, max_positions=32), replace(DataConfig(), max_len=30, pad_multiple=8)) == []
    (problem,) = model_problems(model, replace(DataConfig(), max_len=30, pad_multiple=8))
    assert problem.startswith("data.max_len=30 padded to data.pad_multiple=8 makes batches of 32, more than model.max_positions=30")
    assert model_problems(replace(model, positional="sinusoidal"), replace(DataConfig(), max_len=30, pad_multiple=8)) == []


def test_attention_dropout_is_refused_for_a_kernel_that_forms_no_attention_weights():
    """Linear attention took model.attention_dropout and dropped nothing: a row ablating it would compare equals."""
    (problem,) = model_problems(replace(ModelConfig(), attention="linear", attention_dropout=0.1), DataConfig())
    assert problem.startswith("model.attention_dropout=0.1 does nothing with model.attention='linear'")
    assert model_problems(replace(ModelConfig(), attention="linear"), DataConfig()) == []
    assert model_problems(replace(ModelConfig(), attention="additive", attention_dropout=0.1), DataConfig()) == []
