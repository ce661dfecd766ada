"""The builder's refusals of a researcher's variant (a plugin's): one whose constructor or kernel call does not take
what the builder gives is named with its key, class and file; one that saves a buffer with the model cannot train
as members unless it takes a `members` argument."""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, tiny_model

from ablate.model.activations import ACTIVATIONS
from ablate.model.attention import ATTENTION, AttentionKernel
from ablate.model.build import NotMemberable, build_transformer, member_problem
from ablate.model.positional import POSITIONAL, PositionalEncoding, sinusoids
from ablate.registry import register, restoring

HERE = __file__


class HalfSinusoids(PositionalEncoding):
    """Sinusoids at half strength, kept as a buffer saved with the model (register_buffer's default)."""

    persistent = True

    def __init__(self, *, d_model: int, max_positions: int):
        super().__init__()
        self.register_buffer("pe", 0.5 * sinusoids(max_positions, d_model), persistent=self.persistent)

    def forward(self, x, start: int = 0):
        return x + self.pe[start : start + x.size(1)]


class Unsaved(HalfSinusoids):
    persistent = False


def test_a_variant_saving_a_buffer_with_the_model_is_refused_as_members_before_any_data_loads():
    """It had passed the check (parameters only), then every group died loading its stacked weights with a RuntimeError."""
    with restoring(POSITIONAL):
        register(POSITIONAL, "half_test")(HalfSinusoids)
        register(POSITIONAL, "unsaved_test")(Unsaved)
        build_transformer(tiny_model(positional="half_test"), VOCAB)  # an ordinary model builds
        said = member_problem(tiny_model(positional="half_test"), VOCAB)
        assert said and said.startswith("model.positional=half_test has buffers saved with the model (pe: ")
        assert "persistent=False" in said
        with pytest.raises(NotMemberable):
            build_transformer(tiny_model(positional="half_test"), VOCAB, members=2)
        assert member_problem(tiny_model(positional="unsaved_test"), VOCAB) is None
        build_transformer(tiny_model(positional="unsaved_test"), VOCAB, members=2)


class NoKeywords(AttentionKernel):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, mask, scale):
        return q


class NoScale(AttentionKernel):
    def __init__(self, *, heads, d_k, dropout=0.0):
        super().__init__()

    def forward(self, q, k, v, mask):
        return q


class Stateless(AttentionKernel):  # no __init__: nn.Module's, which binds anything (front-door review: a traceback)
    def forward(self, q, k, v, mask, scale):
        return q


class Takes(torch.nn.Module):
    def __init__(self, slope):
        super().__init__()

    def forward(self, x):
        return x


@pytest.mark.parametrize(
    "registry, key, cls, said",
    [
        (ATTENTION, "attention", NoKeywords, "NoKeywords ({file}) cannot be built with heads, d_k, dropout (got an unexpected keyword argument 'heads')"),
        (ATTENTION, "attention", Stateless, "Stateless ({file}) cannot be built with heads, d_k, dropout (Stateless has no __init__ of its own, and nn.Module's takes no arguments)"),
        (ATTENTION, "attention", NoScale, "NoScale.forward ({file}) cannot be called as forward(q, k, v, mask, scale) (too many positional arguments)"),
        (ACTIVATIONS, "activation", Takes, "Takes ({file}) cannot be built with no arguments (missing a required argument: 'slope')"),
    ],
    ids=["constructor", "no-constructor", "kernel-call", "activation"],
)  # fmt: skip
def test_a_variant_the_builder_cannot_call_is_named_with_its_key_class_and_file(registry, key, cls, said):
    """These were TypeErrors from inside the builder, or from the first forward pass after the data had loaded."""
    with restoring(registry):
        register(registry, "odd_test")(cls)
        with pytest.raises(ValueError) as e:
            build_transformer(tiny_model(**{key: "odd_test"}), VOCAB)
    assert str(e.value).startswith(f"model.{key}=odd_test: " + said.format(file=HERE))
    assert str(e.value).endswith(
        "docs/variants.md gives " + ("a kernel's signature" if "forward" in said else "what each registry's classes take")
    )
