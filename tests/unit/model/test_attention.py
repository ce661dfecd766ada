"""Every registered kernel: shapes, masking, the fused kernel against a plain reference; multi-head attention."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import dot_product_attention

from ablate.model.attention import ATTENTION, KERNEL_OPTIONS, AttentionKernel, ScaledDotProduct
from ablate.model.positional import POSITIONAL


def reference_attention(q, k, v, mask, scale):
    """softmax(Q K^T * scale) V written out by hand (Eq. 1)."""
    heads = q.size(1)
    k = k.repeat_interleave(heads // k.size(1), dim=1)
    v = v.repeat_interleave(heads // v.size(1), dim=1)
    scores = (q @ k.transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def qkv(b=2, h=4, g=4, t=5, s=7, d_k=8, d_v=6):
    return torch.randn(b, h, t, d_k), torch.randn(b, g, s, d_k), torch.randn(b, g, s, d_v)


def key_mask(b=2, s=7):
    mask = torch.ones(b, 1, 1, s, dtype=torch.bool)
    mask[1, ..., 4:] = False
    return mask


@pytest.mark.parametrize("kv_groups", [4, 2, 1])
def test_scaled_dot_product_matches_reference(kv_groups):
    q, k, v = qkv(g=kv_groups)
    mask = key_mask()
    out = ScaledDotProduct(heads=4, d_k=8)(q, k, v, mask, 8**-0.5)
    torch.testing.assert_close(out, reference_attention(q, k, v, mask, 8**-0.5), atol=1e-5, rtol=1e-5)


def test_per_head_scale_folded_into_query_matches_reference():
    q, k, v = qkv()
    scale = torch.tensor([0.1, 0.5, 1.0, 2.0]).view(4, 1, 1)
    out = ScaledDotProduct(heads=4, d_k=8)(q, k, v, None, scale)
    torch.testing.assert_close(out, reference_attention(q, k, v, None, scale), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(ATTENTION))
@pytest.mark.parametrize("kv_groups", [4, 1])
def test_kernel_shape_and_masked_keys_are_ignored(name, kv_groups):
    kernel = ATTENTION[name](heads=4, d_k=8).eval()
    q, k, v = qkv(g=kv_groups)
    mask = key_mask()
    out = kernel(q, k, v, mask, 8**-0.5)
    assert out.shape == (2, 4, 5, 6)
    # Whatever sits at masked key positions must not reach the output.
    k2, v2 = k.clone(), v.clone()
    k2[1, :, 4:] = torch.randn_like(k2[1, :, 4:]) * 100
    v2[1, :, 4:] = torch.randn_like(v2[1, :, 4:]) * 100
    torch.testing.assert_close(kernel(q, k2, v2, mask, 8**-0.5), out)


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_kernel_output_is_convex_combination_of_values(name):
    # Rows of the attention weights sum to 1: with all values equal to c, the output is c.
    kernel = ATTENTION[name](heads=4, d_k=8).eval()
    q, k, _ = qkv()
    v = torch.full((2, 4, 7, 6), 3.0)
    torch.testing.assert_close(kernel(q, k, v, key_mask(), 1.0), torch.full((2, 4, 5, 6), 3.0))


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_scaling_acts_on_every_kernel(name):
    kernel = ATTENTION[name](heads=4, d_k=8).eval()
    q, k, v = qkv()
    assert not torch.allclose(kernel(q, k, v, None, 1.0), kernel(q, k, v, None, 0.05))


def test_multi_query_shares_keys_and_values():
    mha = dot_product_attention(heads=4, d_k=8, kv_heads=1)
    # One key and one value head: the K/V part of the projection has d_k + d_v rows, not heads * (d_k + d_v).
    assert mha.in_proj.weight.shape == (4 * 8 + 8 + 8, 16)
    cache: dict = {}
    mha(torch.randn(2, 3, 16), cache=cache)
    assert cache["k"].shape == (2, 1, 3, 8) and cache["v"].shape == (2, 1, 3, 8)
    # Reference: every query head attends with the same single K/V head.
    x = torch.randn(2, 3, 16)
    q, k, v = mha.in_proj(x).split([32, 8, 8], dim=-1)
    q = q.view(2, 3, 4, 8).transpose(1, 2)
    k, v = k.view(2, 3, 1, 8).transpose(1, 2), v.view(2, 3, 1, 8).transpose(1, 2)
    ref = reference_attention(q, k.expand(2, 4, 3, 8), v.expand(2, 4, 3, 8), None, 8**-0.5)
    torch.testing.assert_close(mha(x), mha.out_proj(ref.transpose(1, 2).flatten(2)), atol=1e-5, rtol=1e-5)


def test_d_k_and_d_v_are_independent_of_d_model():
    mha = dot_product_attention(heads=2, d_k=3, d_v=5)
    assert mha(torch.randn(2, 4, 16), torch.randn(2, 6, 16)).shape == (2, 4, 16)
    assert mha.out_proj.in_features == 2 * 5
    assert math.isclose(mha.scaling(), 3**-0.5)


# -- local (windowed) and linear attention against plain references --------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_local_attention_is_softmax_attention_within_the_window(causal):
    q, k, v = qkv(t=9, s=9)
    kernel = ATTENTION["local"](heads=4, d_k=8, window=2, causal=causal, self_attention=True)
    i, j = torch.arange(9)[:, None], torch.arange(9)[None, :]
    band = (i - j <= 2) & (i - j >= (0 if causal else -2))
    mask = torch.ones(2, 1, 1, 9, dtype=torch.bool)
    mask[1, ..., 8:] = False  # padding, leaving every query some key inside its window
    torch.testing.assert_close(kernel(q, k, v, mask, 0.3), reference_attention(q, k, v, mask & band, 0.3))
    # The last 3 queries of a cached step see the same band as in the full pass.
    torch.testing.assert_close(kernel(q[:, :, 6:], k, v, None, 0.3), reference_attention(q, k, v, band, 0.3)[:, :, 6:])
    # Cross attention (no shared position axis) stays full.
    cross = ATTENTION["local"](heads=4, d_k=8, window=2)
    torch.testing.assert_close(cross(q, k, v, mask, 0.3), reference_attention(q, k, v, mask, 0.3))


def linear_reference(q, k, v, mask, scale, causal):
    phi = lambda x: torch.nn.functional.elu(x) + 1  # noqa: E731
    heads = q.size(1)
    k, v = k.repeat_interleave(heads // k.size(1), dim=1), v.repeat_interleave(heads // v.size(1), dim=1)
    weights = phi(q * scale) @ phi(k).transpose(-1, -2)  # (B, H, T, S), all positive
    t, s = q.size(2), k.size(2)
    if causal:
        weights = weights * torch.ones(t, s).tril(s - t)
    if mask is not None:
        weights = weights * mask
    return (weights / weights.sum(-1, keepdim=True)) @ v


@pytest.mark.parametrize("kv_groups", [4, 1])
def test_linear_attention_matches_its_quadratic_form(kv_groups):
    q, k, v = qkv(g=kv_groups)
    kernel = ATTENTION["linear"](heads=4, d_k=8)
    torch.testing.assert_close(kernel(q, k, v, key_mask(), 0.5), linear_reference(q, k, v, key_mask(), 0.5, False), rtol=1e-4, atol=1e-5)
    causal = ATTENTION["linear"](heads=4, d_k=8, causal=True)
    q, k, v = qkv(t=7, s=7, g=kv_groups)
    full = causal(q, k, v, None, 0.5)
    torch.testing.assert_close(full, linear_reference(q, k, v, None, 0.5, True), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(causal(q[:, :, 4:], k, v, None, 0.5), full[:, :, 4:], rtol=1e-4, atol=1e-5)  # cached steps


def test_linear_attention_refuses_position_biases_naming_the_compatible_encodings():
    q, k, v = qkv()
    bias_free = sorted(name for name, cls in POSITIONAL.items() if not cls.adds_bias)
    assert bias_free and len(bias_free) < len(POSITIONAL)
    with pytest.raises(ValueError, match="position biases") as err:
        ATTENTION["linear"](heads=4, d_k=8)(q, k, v, torch.zeros(1, 4, 5, 7), 1.0)
    assert str(err.value).endswith(str(bias_free))


# -- the facts a kernel declares -------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_kernel_declares_its_facts_and_takes_exactly_its_options(name):
    cls = ATTENTION[name]
    assert issubclass(cls, AttentionKernel) and isinstance(cls.takes_bias, bool)
    assert set(cls.options) <= set(KERNEL_OPTIONS)
    values = {"causal": True, "self_attention": True, "window": 3, "members": 2}
    cls(heads=4, d_k=8, dropout=0.1, **{o: values[o] for o in cls.options})  # every declared option is accepted
    for undeclared in set(KERNEL_OPTIONS) - set(cls.options):
        with pytest.raises(TypeError):
            cls(heads=4, d_k=8, **{undeclared: values[undeclared]})


def test_a_kernel_cannot_declare_an_option_the_builder_never_offers():
    with pytest.raises(AssertionError, match="temperature"):
        type("Bad", (AttentionKernel,), {"options": ("causal", "temperature")})


@pytest.mark.parametrize("name", sorted(n for n, c in ATTENTION.items() if c.takes_bias))
def test_kernels_that_take_bias_add_it_to_the_logits(name):
    kernel = ATTENTION[name](heads=4, d_k=8).eval()
    q, k, v = qkv()
    bias = torch.zeros(1, 4, 5, 7)
    bias[..., 4:] = float("-inf")  # a float mask: -inf keys get no weight, like a bool mask
    bool_mask = torch.ones(1, 1, 1, 7, dtype=torch.bool)
    bool_mask[..., 4:] = False
    torch.testing.assert_close(kernel(q, k, v, bias, 0.5), kernel(q, k, v, bool_mask, 0.5))


def test_causal_scaled_dot_product_uses_is_causal_and_matches_the_masked_form_at_real_positions(monkeypatch):
    """The decoder's full-pass mask (causal plus right padding) runs as is_causal, FlashAttention's form: real query
    positions get exactly what the masked kernel gives."""
    torch.manual_seed(0)
    b, h, t, d = 2, 4, 6, 8
    q, k, v = torch.randn(b, h, t, d), torch.randn(b, h, t, d), torch.randn(b, h, t, d)
    real = torch.tensor([6, 3])  # row 1: 3 real target positions, then padding
    pad = torch.arange(t)[None, :] < real[:, None]  # (B, T)
    mask = torch.ones(t, t, dtype=torch.bool).tril() & pad[:, None, None, :]  # (B, 1, T, T)
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", lambda *a, **kw: calls.append(kw) or sdpa(*a, **kw))
    fast = ScaledDotProduct(heads=h, d_k=d, causal=True)(q, k, v, mask, d**-0.5)
    assert calls[-1]["is_causal"] and calls[-1]["attn_mask"] is None
    masked = ScaledDotProduct(heads=h, d_k=d)(q, k, v, mask, d**-0.5)
    assert not calls[-1]["is_causal"] and calls[-1]["attn_mask"] is mask
    torch.testing.assert_close(fast[pad[:, None, :, None].expand_as(fast)], masked[pad[:, None, :, None].expand_as(masked)])
    # A cached step (queries fewer than keys) and a float mask (position biases) keep their masks.
    ScaledDotProduct(heads=h, d_k=d, causal=True)(q[:, :, -2:], k, v, mask[..., -2:, :], d**-0.5)
    assert not calls[-1]["is_causal"]
    bias = torch.zeros(b, h, t, t).masked_fill(~mask, float("-inf"))
    ScaledDotProduct(heads=h, d_k=d, causal=True)(q, k, v, bias, d**-0.5)
    assert not calls[-1]["is_causal"] and calls[-1]["attn_mask"] is bias


def test_a_subclass_inherits_only_the_options_its_constructor_takes():
    class Plain(ScaledDotProduct):  # a user's kernel built on the fused one, with its own constructor
        def __init__(self, *, heads: int, d_k: int, dropout: float = 0.0):
            super().__init__(heads=heads, d_k=d_k, dropout=dropout)

    class Keeps(ScaledDotProduct):
        pass

    assert Plain.options == () and Keeps.options == ("causal",)


def test_a_model_with_the_fused_kernel_switches_cudnn_attention_off():
    """cuDNN's SDPA builds a graph per input shape (20-24 ms of host time a call on an H200): once a model uses the
    fused kernel, SDPA runs without that backend, while the other backends stay as the process had them."""
    before = torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        ScaledDotProduct(heads=4, d_k=8)
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() == before[1]
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before[0])
