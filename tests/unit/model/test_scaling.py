"""Every registered logit scaling: its initial value, per-head learning, QK-norm's bounded logits."""

from __future__ import annotations

import pytest
import torch
from helpers import dot_product_attention

from ablate.model.scaling import SCALING, Scaling


@pytest.mark.parametrize("name", sorted(SCALING))
def test_every_scaling_is_a_scaling_whose_normalize_keeps_shapes(name):
    scaling = SCALING[name](heads=4, d_k=16)
    assert isinstance(scaling, Scaling)
    x = torch.randn(2, 4, 3, 16)
    assert scaling.normalize(x).shape == x.shape


@pytest.mark.parametrize("name", sorted(SCALING))
def test_scalings(name):
    scale = SCALING[name](heads=4, d_k=16)()
    expected = {"inv_sqrt_dk": 0.25, "inv_dk": 1 / 16, "none": 1.0, "learned": 0.25, "qk_norm": 10.0}[name]
    values = scale.flatten() if torch.is_tensor(scale) else torch.tensor([scale])
    torch.testing.assert_close(values, torch.full_like(values, expected))


def test_learned_scaling_is_per_head_and_trained():
    scaling = SCALING["learned"](heads=4, d_k=16)
    mha = dot_product_attention(heads=4, d_k=4, scaling=scaling)
    mha(torch.randn(2, 5, 16)).pow(2).sum().backward()
    assert scaling.log_scale.grad is not None and scaling.log_scale.grad.shape == (4,)
    assert scaling.log_scale.grad.abs().sum() > 0


def test_qk_norm_bounds_the_logits_whatever_the_scale_of_q_and_k():
    torch.manual_seed(0)
    scaling = SCALING["qk_norm"](heads=4, d_k=4)
    mha = dot_product_attention(heads=4, d_k=4, scaling=scaling).eval()
    x = torch.randn(2, 5, 16)
    out = mha(x)
    with torch.no_grad():
        mha.in_proj.weight[: 2 * 16] *= 100.0  # 100x larger q and k: same cosine logits, same output
    torch.testing.assert_close(mha(x), out, rtol=1e-4, atol=1e-4)
    mha.train()
    mha(x).pow(2).sum().backward()
    assert scaling.log_scale.grad.abs().sum() > 0
