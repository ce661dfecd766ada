"""Whole-model invariants over every registered variant: shapes, causality, cache == full forward, casting.

Running every attention x positional x scaling x structure product takes thousands of tests; instead a small
covering set (built at collection time from the registries) puts every compatible pair of variants, and every
variant with every structure, through each invariant. A newly registered variant is picked up with no edit here;
`test_every_variant_meets_every_invariant` checks that, and the dummy-variant tests show it.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from helpers import VOCAB, random_batch, tiny_model

from ablate.model import ATTENTION, POSITIONAL, SCALING, build_transformer, compatible, count_parameters
from ablate.model.attention import ScaledDotProduct
from ablate.model.positional import NoPosition
from ablate.model.transformer import reorder_cache
from ablate.registry import register, restoring

STRUCTURE = [
    {},
    {"kv_heads": 1},
    {"kv_heads": 2, "norm": "pre", "activation": "gelu"},
    {"tie_embeddings": "none", "d_k": 3, "d_v": 5, "embed_scale": False},
    {"tie_embeddings": "decoder", "heads": 2, "enc_layers": 1, "dec_layers": 3},
    {"attention_window": 2},  # shorter than the test sequences: local attention really windows
]


# -- the covering set ------------------------------------------------------------------------


def _factors() -> dict[str, list]:
    """Each factor's values, read from the registries now (so a variant registered later is included)."""
    return {"attention": sorted(ATTENTION), "positional": sorted(POSITIONAL), "attention_scaling": sorted(SCALING),
            "structure": list(range(len(STRUCTURE)))}  # fmt: skip


def _allowed(case: dict) -> bool:
    """Config validation refuses incompatible kernel/positional pairs (tested in tests/unit/config), so skip them."""
    return "attention" not in case or "positional" not in case or compatible(case["attention"], case["positional"])


def required_pairs() -> set[tuple[tuple[str, object], tuple[str, object]]]:
    """Every allowed pair of values of two different factors."""
    factors = _factors()
    pairs = set()
    for f1, f2 in itertools.combinations(factors, 2):
        for v1, v2 in itertools.product(factors[f1], factors[f2]):
            if _allowed({f1: v1, f2: v2}):
                pairs.add(((f1, v1), (f2, v2)))
    return pairs


def pairs_of(case: dict) -> set:
    return {((f1, case[f1]), (f2, case[f2])) for f1, f2 in itertools.combinations(_factors(), 2)}


def covering_cases() -> list[dict]:
    """A deterministic greedy all-pairs set: start each case from the first uncovered pair, then give every other
    factor the allowed value that covers the most uncovered pairs (first in sorted order on ties)."""
    factors, uncovered, cases = _factors(), required_pairs(), []
    while uncovered:
        (f1, v1), (f2, v2) = min(uncovered, key=repr)
        case = {f1: v1, f2: v2}
        for f in factors:
            if f in case:
                continue
            options = [v for v in factors[f] if _allowed({**case, f: v})]
            assert options, f"no {f} is compatible with {case}"

            def gain(v, f=f, case=case, uncovered=uncovered):
                return sum(all({**case, f: v}.get(g) == w for g, w in pair) for pair in uncovered)

            case[f] = max(options, key=gain)  # max keeps the first of equal gains
        cases.append(case)
        uncovered -= pairs_of(case)
    return cases


def overrides(case: dict) -> dict:
    return {**{k: v for k, v in case.items() if k != "structure"}, **STRUCTURE[case["structure"]]}


def case_id(case: dict) -> str:
    return f"{case['attention']}-{case['positional']}-{case['attention_scaling']}-s{case['structure']}"


CASES = covering_cases()


# -- the invariants --------------------------------------------------------------------------


def check_forward_shape_and_backward(case: dict) -> None:
    model = build_transformer(tiny_model(**overrides(case)), VOCAB)
    src, tgt = random_batch()
    logits = model(src, tgt)
    assert logits.shape == (3, 6, VOCAB)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    # Every parameter takes part (a learned scale or table that never gets a gradient is a wiring bug).
    assert [n for n, p in model.named_parameters() if p.grad is None] == []
    # Training scores real targets only: logits at the kept positions are the full pass's logits there.
    keep = tgt != 0
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt, keep=keep), model(src, tgt)[keep], atol=1e-5, rtol=1e-5)


def check_decoder_is_causal(case: dict) -> None:
    model = build_transformer(tiny_model(**overrides(case)), VOCAB).eval()
    src, tgt = random_batch(pad_tail=False)
    before = model(src, tgt)
    changed = tgt.clone()
    changed[:, 3:] = (changed[:, 3:] + 1) % (VOCAB - 4) + 4
    after = model(src, changed)
    torch.testing.assert_close(after[:, :3], before[:, :3])
    assert not torch.allclose(after[:, 3:], before[:, 3:])


def check_cached_decoding_equals_full_forward(case: dict) -> None:
    model = build_transformer(tiny_model(**overrides(case)), VOCAB).eval()
    src, tgt = random_batch(pad_tail=False)
    src[1, 5:] = 0  # padded source rows must be masked in cross attention during decoding too
    with torch.no_grad():
        full = model(src, tgt)
        memory, src_mask = model.encode(src)
        cache = model.new_cache()
        # A 2-token prefill, then one token at a time.
        steps = [model.decode(tgt[:, :2], memory, src_mask, cache, start=0)]
        for t in range(2, tgt.size(1)):
            steps.append(model.decode(tgt[:, t : t + 1], memory, src_mask, cache, start=t))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def check_moves_and_casts_like_any_module(case: dict) -> None:
    # Lightning moves the model to its device and precision through nn.Module._apply; a variant that shadows one
    # of nn.Module's own methods (RoPE once named a helper `_apply`) breaks only there, so cast here for real.
    model = build_transformer(tiny_model(**overrides(case)), VOCAB).to("cpu", torch.float64)
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    src, tgt = random_batch()
    assert model(src, tgt).dtype == torch.float64


INVARIANTS = [check_forward_shape_and_backward, check_decoder_is_causal, check_cached_decoding_equals_full_forward,
              check_moves_and_casts_like_any_module]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("invariant", INVARIANTS, ids=lambda f: f.__name__.removeprefix("check_"))
def test_invariant(invariant, case):
    invariant(case)


# -- the covering set covers: checked against the registries at test time --------------------


def test_every_variant_meets_every_invariant():
    params = {mark.args[0]: list(mark.args[1]) for mark in test_invariant.pytestmark}
    assert params["invariant"] == INVARIANTS
    cases = params["case"]
    ran = {(factor, case[factor], invariant) for case in cases for invariant in params["invariant"] for factor in case}
    for factor, registry in (("attention", ATTENTION), ("positional", POSITIONAL), ("attention_scaling", SCALING)):
        for name, invariant in itertools.product(registry, INVARIANTS):
            assert (factor, name, invariant) in ran, f"{factor}={name} never meets {invariant.__name__}"
    missing = required_pairs() - set().union(*(pairs_of(c) for c in cases))
    assert not missing, f"pairs no case covers: {sorted(missing, key=repr)[:10]}"


def test_covering_set_is_small_and_deterministic():
    every = [c for c in itertools.product(*_factors().values()) if compatible(c[0], c[1])]
    assert covering_cases() == CASES
    assert len(CASES) < len(every) / 5


class DummyPosition(NoPosition):
    """Stands for a positional encoding someone registers tomorrow."""


def test_a_new_variant_is_covered_with_no_test_edit():
    with restoring(POSITIONAL, ATTENTION):  # registered the only way in, taken back when the test ends
        register(POSITIONAL, "zz_dummy")(DummyPosition)
        register(ATTENTION, "zz_kernel")(type("ZzKernel", (ScaledDotProduct,), {"takes_bias": False}))
        _check_new_variants_are_covered()


def _check_new_variants_are_covered():
    cases = covering_cases()
    assert not required_pairs() - set().union(*(pairs_of(c) for c in cases))
    mine = [c for c in cases if "zz_dummy" in c.values() or "zz_kernel" in c.values()]
    assert {c["structure"] for c in mine if c["positional"] == "zz_dummy"} == set(range(len(STRUCTURE)))
    assert {c["attention_scaling"] for c in mine if c["attention"] == "zz_kernel"} == set(SCALING)
    assert all(compatible(c["attention"], c["positional"]) for c in cases)  # bias-adding encodings never meet zz_kernel
    for case in mine[:2]:
        for invariant in INVARIANTS:
            invariant(case)


# -- single behaviours -----------------------------------------------------------------------


def test_reorder_cache_follows_beams():
    model = build_transformer(tiny_model(), VOCAB).eval()
    src, tgt = random_batch(pad_tail=False)
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        cache = model.new_cache()
        model.decode(tgt[:, :3], memory, src_mask, cache)
        order = torch.tensor([2, 0, 0])
        reorder_cache(cache, order)
        step = model.decode(tgt[order, 3:4], memory[order], src_mask[order], cache, start=3)
        full = model(src[order], tgt[order, :4])
    torch.testing.assert_close(step[:, 0], full[:, 3], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("tie, n_tables", [("all", 1), ("decoder", 2), ("none", 3)])
def test_weight_tying(tie, n_tables):
    model = build_transformer(tiny_model(tie_embeddings=tie), VOCAB)
    tables = {id(model.src_embed.tokens.weight), id(model.tgt_embed.tokens.weight), id(model.output.weight)}
    assert len(tables) == n_tables
    assert count_parameters(model)["embeddings"] == n_tables * VOCAB * 16


def test_kv_heads_shrink_key_value_projections():
    full = count_parameters(build_transformer(tiny_model(), VOCAB))["encoder"]
    mqa = count_parameters(build_transformer(tiny_model(kv_heads=1), VOCAB))["encoder"]
    # Per attention block, K and V lose (heads - 1) * (d_k + d_v) * (d_model + 1) parameters.
    assert full - mqa == 2 * 3 * (4 + 4) * (16 + 1)


def test_head_dims_default_to_d_model_over_heads():
    assert tiny_model().head_dims == (4, 4)
    assert tiny_model(d_k=3).head_dims == (3, 4)
    mha = build_transformer(tiny_model(d_k=3, d_v=5), VOCAB).encoder[0].self_attn
    assert (mha.d_k, mha.d_v) == (3, 5)


def test_dropout_is_active_only_in_training():
    model = build_transformer(tiny_model(dropout=0.5), VOCAB)
    src, tgt = random_batch()
    model.train()
    assert not torch.allclose(model(src, tgt), model(src, tgt))
    model.eval()
    torch.testing.assert_close(model(src, tgt), model(src, tgt))


def test_no_module_shadows_an_nn_module_method():
    import ablate.model.attention as attention
    import ablate.model.positional as positional
    import ablate.model.scaling as scaling
    import ablate.model.transformer as transformer
    from ablate.model import dropout

    allowed = {"__init__", "__doc__", "__module__", "__qualname__", "forward", "extra_repr", "__annotations__",
               "__firstlineno__", "__static_attributes__", "__dict__", "__weakref__", "__init_subclass__",
               "__annotate_func__", "__annotations_cache__"}  # fmt: skip
    base = set(dir(torch.nn.Module))
    for mod in (attention, positional, scaling, transformer, dropout):
        for cls in vars(mod).values():
            if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls.__module__ == mod.__name__:
                assert not (set(vars(cls)) & base) - allowed, f"{cls.__name__} overrides {(set(vars(cls)) & base) - allowed}"


@pytest.mark.parametrize("d_ff", [10**13, 2**62], ids=["no-memory", "size-overflow"])
def test_weights_no_memory_holds_are_an_error_naming_the_sizes_not_torchs(d_ff):
    with pytest.raises(
        ValueError, match=rf"not enough memory on this machine for the model's weights \(.*model.d_ff={d_ff}.*vocabulary {VOCAB}\)"
    ):
        build_transformer(tiny_model(d_ff=d_ff), VOCAB)


def test_a_kernel_of_ones_own_that_returns_the_wrong_shape_is_named_not_a_matmul_error():
    """A plugin kernel returning (B, H, T, Dk) where Dv was expected failed many frames later as "mat1 and mat2
    shapes cannot be multiplied": the kernel is named, with the shape it gave and the one expected."""

    class Transposed(ScaledDotProduct):
        def forward(self, q, k, v, mask, scale):
            return super().forward(q, k, v, mask, scale).transpose(2, 3)

    with restoring(ATTENTION):
        register(ATTENTION, "zz_transposed")(Transposed)
        model = build_transformer(tiny_model(attention="zz_transposed", d_v=4), VOCAB)
        src, tgt = random_batch()
        with pytest.raises(
            ValueError,
            match=r"attention kernel Transposed returned shape \(\d+, \d+, 4, \d+\); \(B, H, T, Dv\) = \(\d+, \d+, \d+, 4\) is expected",
        ):
            model(src, tgt)
