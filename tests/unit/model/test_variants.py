"""Facts about variant combinations, read from the classes' declared attributes: compatible pairs, length limits."""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, tiny_model

from ablate.model import ATTENTION, POSITIONAL, build_transformer, compatible, compatible_positionals, max_length

BOUNDED = sorted(n for n, c in POSITIONAL.items() if c.bounded_length)
UNBOUNDED = sorted(n for n, c in POSITIONAL.items() if not c.bounded_length)


def test_compatible_partners_come_from_the_declared_facts():
    bias_free = sorted(n for n, c in POSITIONAL.items() if not c.adds_bias)
    for attention, kernel in ATTENTION.items():
        expected = sorted(POSITIONAL) if kernel.takes_bias else bias_free
        assert compatible_positionals(attention) == expected
        assert [p for p in sorted(POSITIONAL) if compatible(attention, p)] == expected


def test_linear_attention_takes_exactly_the_bias_free_encodings():
    assert not ATTENTION["linear"].takes_bias
    assert compatible_positionals("linear") == sorted(n for n, c in POSITIONAL.items() if not c.adds_bias)
    assert "alibi" not in compatible_positionals("linear") and "rotary" in compatible_positionals("linear")


@pytest.mark.parametrize("name", BOUNDED)
def test_bounded_encodings_cap_length_at_max_positions(name):
    cfg = tiny_model(positional=name, max_positions=8)
    assert max_length(cfg) == 8
    model = build_transformer(cfg, VOCAB).eval()
    src = torch.randint(4, VOCAB, (1, 8))
    model(src, src)  # max_length tokens fit
    with pytest.raises(ValueError, match="max_positions=8"):
        model(torch.randint(4, VOCAB, (1, 9)), src)


@pytest.mark.parametrize("name", UNBOUNDED)
def test_unbounded_encodings_take_sequences_past_max_positions(name):
    cfg = tiny_model(positional=name, max_positions=4)
    assert max_length(cfg) is None
    src = torch.randint(4, VOCAB, (2, 10))
    assert build_transformer(cfg, VOCAB)(src, src).shape == (2, 10, VOCAB)


def test_learned_positions_cap_decoding_at_max_positions():
    from ablate.evaluation.search import beam_search

    assert POSITIONAL["learned"].bounded_length
    cfg = tiny_model(positional="learned", max_positions=5)
    model = build_transformer(cfg, VOCAB).eval()
    src = torch.randint(4, VOCAB, (2, 4))
    outs = beam_search(model, src, beam=2, max_len_a=1.0, max_len_b=50, cap=max_length(cfg))  # would fail uncapped
    assert all(len(o) < 5 for o in outs)


def test_max_length_names_an_unknown_positional():
    with pytest.raises(ValueError, match="model.positional='learnt'.*did you mean 'learned'"):
        max_length(tiny_model(positional="learnt"))
