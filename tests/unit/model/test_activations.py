"""The activation registry (ablate.model.activations): the paper's ReLU and GELU built in, a variant of one's own
registered the only way in, and one with parameters kept out of member models."""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, random_batch, tiny_model

from ablate import plugins
from ablate.model import build_transformer
from ablate.model.activations import ACTIVATIONS
from ablate.model.loss import translation_loss
from ablate.registry import register, restoring


class Squared(torch.nn.Module):
    """ReLU squared (So et al., 2021): a stateless activation of one's own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).square()


def test_the_built_ins_are_relu_and_gelu_and_the_registry_is_read_only():
    assert dict(ACTIVATIONS) == {"relu": torch.nn.ReLU, "gelu": torch.nn.GELU}
    with pytest.raises(TypeError, match="read-only"):
        ACTIVATIONS["silu"] = torch.nn.SiLU


@pytest.mark.parametrize("members", [None, 2])
def test_a_registered_activation_is_what_the_feed_forward_applies(members):
    with restoring(ACTIVATIONS):
        register(ACTIVATIONS, "squared_test")(Squared)
        model = build_transformer(tiny_model(activation="squared_test"), VOCAB, members=members)
        assert all(isinstance(layer.ff.net[1], Squared) for layer in [*model.encoder, *model.decoder])
    if members is None:
        src, tgt = random_batch()
        from ablate.data.batching import collate

        items = [(i, s[s != 0].numpy(), t[t != 0].numpy()) for i, (s, t) in enumerate(zip(src, tgt))]
        loss, _, _ = translation_loss(model, collate(items), 0.1)
        loss.backward()
        assert model.encoder[0].ff.net[0].weight.grad.abs().sum() > 0


def test_an_activation_with_parameters_is_refused_in_a_member_model_naming_it():
    """Built once and shared, its parameters would silently be one set for all members."""
    with restoring(ACTIVATIONS):
        register(ACTIVATIONS, "prelu_test")(torch.nn.PReLU)
        build_transformer(tiny_model(activation="prelu_test"), VOCAB)  # an ordinary model builds
        with pytest.raises(ValueError, match="model.activation=prelu_test has parameters but takes no `members`"):
            build_transformer(tiny_model(activation="prelu_test"), VOCAB, members=2)


def test_a_saved_config_naming_an_activation_no_plugin_registered_is_reported_by_its_key():
    assert plugins.unregistered({"activation": "squared_missing", "attention": "scaled_dot_product"}) == [
        "model.activation='squared_missing'"
    ]
    with restoring(*plugins._registries()):
        register(ACTIVATIONS, "squared_missing")(Squared)
        assert plugins.unregistered({"activation": "squared_missing"}) == []
