"""Every registered positional encoding: shapes and offsets; sinusoids against the paper's formula."""

from __future__ import annotations

import math

import pytest
import torch

from ablate.model.positional import POSITIONAL, PositionalEncoding, RelativePosition, sinusoids


def test_sinusoids_match_the_formula():
    d_model = 8
    pe = sinusoids(50, d_model)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert math.isclose(pe[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(pe[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


ABSOLUTE = sorted(n for n, c in POSITIONAL.items() if not c.relative)
RELATIVE = sorted(n for n, c in POSITIONAL.items() if c.relative)


@pytest.mark.parametrize("name", sorted(POSITIONAL))
def test_every_encoding_declares_its_facts(name):
    cls = POSITIONAL[name]
    assert issubclass(cls, PositionalEncoding)
    assert all(isinstance(getattr(cls, fact), bool) for fact in ("relative", "adds_bias", "bounded_length"))
    assert cls.relative == issubclass(cls, RelativePosition)  # the hooks self-attention calls
    assert not cls.adds_bias or cls.relative  # logit biases exist only inside attention


@pytest.mark.parametrize("name", ABSOLUTE)
def test_shape_and_offset_consistency(name):
    module = POSITIONAL[name](d_model=16, max_positions=32)
    x = torch.randn(2, 10, 16)
    full = module(x)
    assert full.shape == x.shape
    # Positions 4..9 computed with start=4 equal the same slice of the full sequence (the KV-cache contract).
    torch.testing.assert_close(module(x[:, 4:], start=4), full[:, 4:])


def test_sinusoidal_extends_past_max_positions():
    module = POSITIONAL["sinusoidal"](d_model=6, max_positions=4)
    out = module(torch.zeros(1, 9, 6))
    torch.testing.assert_close(out[0], sinusoids(9, 6))


def test_learned_refuses_positions_beyond_its_table():
    module = POSITIONAL["learned"](d_model=4, max_positions=5)
    with pytest.raises(ValueError, match="max_positions=5"):
        module(torch.zeros(1, 6, 4))


# -- relative schemes ------------------------------------------------------------------------


def test_registry_has_the_relative_schemes():
    assert {"rotary", "alibi", "t5_bias", "shaw"} <= set(RELATIVE)


def test_rotary_logits_depend_only_on_the_position_difference():
    rope = POSITIONAL["rotary"](heads=2, d_k=8, max_positions=64, causal=False)
    q, k = torch.randn(1, 2, 1, 8), torch.randn(1, 2, 1, 8)

    def logit(m: int, n: int) -> torch.Tensor:
        qm, _ = rope.rotate(q, q, torch.tensor([m]))
        _, kn = rope.rotate(k, k, torch.tensor([n]))
        return (qm * kn).sum(-1)

    torch.testing.assert_close(logit(3, 1), logit(12, 10))
    torch.testing.assert_close(logit(0, 0), (q * k).sum(-1))  # position 0 is the identity
    assert not torch.allclose(logit(3, 1), logit(3, 2))
    # A rotation keeps norms; with an odd d_k the last dim passes through unchanged.
    odd = POSITIONAL["rotary"](heads=1, d_k=5, max_positions=8, causal=False)
    x = torch.randn(1, 1, 4, 5)
    rx, _ = odd.rotate(x, x, torch.arange(4))
    torch.testing.assert_close(rx.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(rx[..., 4], x[..., 4])


def test_alibi_slopes_and_bias():
    from ablate.model.positional import alibi_slopes

    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    assert alibi_slopes(6).shape == (6,) and alibi_slopes(6)[:4].tolist() == alibi_slopes(4).tolist()
    alibi = POSITIONAL["alibi"](heads=8, d_k=4, max_positions=8, causal=True)
    bias = alibi.bias(torch.zeros(1, 8, 3, 4), torch.arange(2, 5), torch.arange(5), 1.0)
    assert bias.shape == (8, 3, 5)
    assert bias[0, 2, 4] == 0 and bias[0, 2, 0] == -4 * 0.5 and bias[7, 0, 0] == -2 * 2.0**-8


def test_t5_buckets_exact_near_log_far_and_split_by_direction():
    from ablate.model.positional import t5_buckets

    rel = torch.arange(-200, 201)
    bi = t5_buckets(rel, bidirectional=True)
    assert bi.min() >= 0 and bi.max() <= 31
    assert bi[200 + 3] != bi[200 - 3]  # direction matters
    assert [t5_buckets(torch.tensor([-d]), True).item() for d in range(8)] == list(range(8))  # exact below 8
    assert t5_buckets(torch.tensor([-128]), True).item() == t5_buckets(torch.tensor([-200]), True).item() == 15
    causal = t5_buckets(rel, bidirectional=False)
    assert (causal[rel >= 0] == 0).all() and causal.max() == 31  # future keys never get their own bucket
    far = t5_buckets(-torch.arange(0, 130), bidirectional=False)
    assert (far[1:] >= far[:-1]).all()  # monotone in distance


def test_shaw_bias_is_query_dot_clipped_relative_embedding():
    shaw = POSITIONAL["shaw"](heads=2, d_k=4, max_positions=64, causal=False)
    q = torch.randn(1, 2, 3, 4)
    bias = shaw.bias(q, torch.arange(3), torch.arange(40), 0.5)
    assert bias.shape == (1, 2, 3, 40)
    a = shaw.table.weight
    torch.testing.assert_close(bias[0, 1, 2, 5], (q[0, 1, 2] @ a[16 + 3]) * 0.5)
    torch.testing.assert_close(bias[0, 0, 0, 39], (q[0, 0, 0] @ a[32]) * 0.5)  # clipped at +16


def test_a_relative_scheme_that_defines_bias_gets_it_called_without_declaring_adds_bias():
    """The docs' example less its `adds_bias = True` line trained with no positions at all: attention calls bias()
    only where the flag is set, and a relative scheme puts nothing on the embeddings. Defining bias() now sets it."""
    from ablate.config import ModelConfig
    from ablate.model.build import build_transformer
    from ablate.registry import register, restoring

    calls = []

    with restoring(POSITIONAL):

        @register(POSITIONAL, "test_penalty")
        class Penalty(RelativePosition):
            def bias(self, q, q_pos, k_pos, scale):
                calls.append(q.shape)
                return -(q_pos[:, None] - k_pos[None, :]).abs().float()

        class Declared(Penalty):
            adds_bias = False  # a subclass that says otherwise is taken at its word, and so are its own

        class Mixin:
            def bias(self, q, q_pos, k_pos, scale):
                return None

        class Mixed(Mixin, RelativePosition):  # a bias() from a mixin: the review's case
            pass

        class Under(Declared):
            pass

        assert Penalty.adds_bias and Mixed.adds_bias and not Declared.adds_bias and not Under.adds_bias
        assert not RelativePosition.adds_bias and not POSITIONAL["rotary"].adds_bias and POSITIONAL["alibi"].adds_bias
        model = build_transformer(ModelConfig(d_model=8, d_ff=16, heads=2, enc_layers=1, dec_layers=1, positional="test_penalty"), 11)
        model(torch.randint(1, 11, (2, 5)), torch.randint(1, 11, (2, 4)))
    assert calls  # the encoder's and the decoder's self-attention asked for it
