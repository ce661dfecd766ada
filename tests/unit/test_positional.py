"""Every registered positional encoding: shapes and offsets; sinusoids against the paper's formula."""

from __future__ import annotations

import math

import pytest
import torch

from ablate.model.positional import POSITIONAL, sinusoids


def test_sinusoids_match_the_formula():
    d_model = 8
    pe = sinusoids(50, d_model)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert math.isclose(pe[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(pe[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


@pytest.mark.parametrize("name", sorted(POSITIONAL))
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
