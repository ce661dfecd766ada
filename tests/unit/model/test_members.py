"""The member model: K Transformers of one architecture as one module (ablate.model.members).

Each member, loaded from an ordinary model's weights, must compute what that model computes on its own rows, for
every registered variant (a researcher's own too, given by ABLATE_TEST_PLUGINS); rows of padding only must stay out of every loss and gradient; and a step must
dispatch the same operations for K = 8 as for K = 1.
"""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, random_batch, tiny_model
from member_models import batched_everywhere, collated, members_of, own_batches
from torch.utils._python_dispatch import TorchDispatchMode

from ablate.config.schema import ModelConfig
from ablate.model import POSITIONAL, SCALING, build_transformer, compatible
from ablate.model.attention import ATTENTION, AttentionKernel
from ablate.model.loss import translation_loss
from ablate.model.member_loss import member_translation_loss
from ablate.model.members import member_state_dict, stack_state_dicts
from ablate.registry import register, restoring

# Every built-in variant with parameters, and the ones without, in combinations config validation allows.
VARIANTS = [
    {},
    {"attention": "additive", "positional": "learned", "attention_scaling": "learned", "kv_heads": 1},
    {"positional": "t5_bias", "attention_scaling": "qk_norm", "kv_heads": 2},
    {"attention": "local", "positional": "shaw", "attention_scaling": "learned", "attention_window": 2},
    {"attention": "linear", "positional": "rotary", "attention_scaling": "inv_dk", "norm": "pre"},
    {"positional": "alibi", "tie_embeddings": "none", "d_k": 3, "d_v": 5},
    {"attention": "additive", "positional": "t5_bias", "tie_embeddings": "decoder", "norm": "pre", "activation": "gelu"},
]
FACTORS = {"attention": ATTENTION, "positional": POSITIONAL, "attention_scaling": SCALING}


def uncovered() -> list[dict]:
    """A case for each registered variant no case above names (a researcher's own, given by ABLATE_TEST_PLUGINS:
    docs/variants.md), with the first partner config validation allows where the default is not: a member model's
    batched branch runs only on an accelerator in training, so this is where a CPU sees it."""
    default = {factor: getattr(ModelConfig(), factor) for factor in FACTORS}
    pair_default = {"attention": default["attention"], "positional": default["positional"]}
    named = {(f, case.get(f, default[f])) for case in VARIANTS for f in FACTORS}
    cases = []
    for factor, registry in FACTORS.items():
        for name in sorted(n for n in registry if (factor, n) not in named):
            case = {factor: name}
            if factor != "attention_scaling" and not compatible(**{**pair_default, **case}):
                partner = "positional" if factor == "attention" else "attention"
                case[partner] = next(n for n in sorted(FACTORS[partner]) if compatible(**{partner: n, factor: name}))
            cases.append(case)
    return cases


@pytest.mark.parametrize("path", ["cpu", "batched"])
@pytest.mark.parametrize("variant", VARIANTS + uncovered(), ids=lambda v: "-".join(map(str, v.values())) or "base")
def test_each_member_computes_what_its_own_model_computes(variant, path, monkeypatch):
    if path == "batched":
        batched_everywhere(monkeypatch)
    plains, group = members_of(tiny_model(**variant), 3)
    singles, batch = collated(own_batches(3))
    smoothing = torch.tensor([0.0, 0.1, 0.3], dtype=torch.float64)
    loss, nll, ntok = member_translation_loss(group, batch, smoothing)
    (loss / ntok).sum().backward()
    grads = dict(group.named_parameters())
    for k, (plain, single) in enumerate(zip(plains, singles)):
        ref_loss, ref_nll, ref_ntok = translation_loss(plain, single, float(smoothing[k]))
        (ref_loss / ref_ntok).backward()
        assert int(ntok[k]) == int(ref_ntok)
        torch.testing.assert_close(loss[k], ref_loss, rtol=1e-12, atol=0)
        torch.testing.assert_close(nll[k], ref_nll, rtol=1e-12, atol=0)
        for name, p in plain.named_parameters():
            torch.testing.assert_close(grads[name].grad[k], p.grad, rtol=1e-9, atol=1e-12, msg=f"member {k}: {name}")
    # The members really are different models: member 0's weights give member 1 another loss.
    assert not torch.allclose(loss[0], translation_loss(plains[1], singles[0], 0.0)[0])


@pytest.mark.parametrize("batched", [False, True], ids=["member-by-member", "batched"])
@pytest.mark.parametrize("attention", sorted(ATTENTION))
def test_rows_of_padding_only_give_no_loss_no_gradient_and_no_nan_in_any_kernel(attention, batched, monkeypatch):
    """A member whose batch has fewer sentences gets rows of padding only; the additive kernel's softmax over a fully
    masked row was NaN, and 0 * NaN reached every weight's gradient. The CPU's member-by-member path drops those rows;
    the batched path, which accelerators take, runs every kernel over them."""
    if batched:
        batched_everywhere(monkeypatch)
    cfg = tiny_model(attention=attention, positional="rotary" if attention == "linear" else "sinusoidal")
    plains, group = members_of(cfg, 2)
    (src0, tgt0), (src1, tgt1) = random_batch(b=3, s=6, t=5), random_batch(b=1, s=6, t=5)
    singles, batch = collated([(src0, tgt0), (src1, tgt1)])
    assert (batch["src"][4:] == 0).all() and (batch["tgt_in"][4:] == 0).all()  # member 1's rows 1-2: padding only
    loss, _, ntok = member_translation_loss(group, batch, torch.zeros(2, dtype=torch.float64))
    (loss / ntok).sum().backward()
    ref_loss, _, ref_ntok = translation_loss(plains[1], singles[1], 0.0)
    (ref_loss / ref_ntok).backward()
    torch.testing.assert_close(loss[1], ref_loss, rtol=1e-12, atol=0)
    for name, p in group.named_parameters():
        assert torch.isfinite(p.grad).all(), name
        torch.testing.assert_close(p.grad[1], dict(plains[1].named_parameters())[name].grad, rtol=1e-9, atol=1e-12)


def test_the_member_layer_norm_is_each_members_own_layer_norm_forward_and_backward():
    from ablate.model.members import MemberLayerNorm

    torch.manual_seed(0)
    norms = [torch.nn.LayerNorm(8) for _ in range(3)]
    for norm in norms:
        torch.nn.init.normal_(norm.weight)
        torch.nn.init.normal_(norm.bias)
    member = MemberLayerNorm(3, 8)
    member.load_state_dict(stack_state_dicts([n.state_dict() for n in norms]))
    x = torch.randn(3 * 4, 5, 8, requires_grad=True)  # member-major: 4 rows a member
    grad = torch.randn(3 * 4, 5, 8)
    member(x).backward(grad)
    for k, norm in enumerate(norms):
        xk = x[4 * k : 4 * (k + 1)].detach().clone().requires_grad_()
        out = norm(xk)
        out.backward(grad[4 * k : 4 * (k + 1)])
        torch.testing.assert_close(member(x)[4 * k : 4 * (k + 1)], out)
        torch.testing.assert_close(x.grad[4 * k : 4 * (k + 1)], xk.grad)
        torch.testing.assert_close(member.weight.grad[k], norm.weight.grad)
        torch.testing.assert_close(member.bias.grad[k], norm.bias.grad)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # normalised in float32, as F.layer_norm is under CUDA's autocast
        half = member(x.detach().bfloat16())
    assert half.dtype == torch.float32
    torch.testing.assert_close(half, member(x.detach().bfloat16().float()))


def test_member_weights_come_out_as_the_ordinary_models_state_dicts():
    plains, group = members_of(tiny_model(positional="learned", attention_scaling="learned"), 3)
    state = group.state_dict()
    for k, plain in enumerate(plains):
        mine = member_state_dict(state, k)
        assert list(mine) == list(plain.state_dict())
        for key, value in plain.state_dict().items():
            assert torch.equal(mine[key], value), key
        fresh = build_transformer(tiny_model(positional="learned", attention_scaling="learned"), VOCAB).double()
        fresh.load_state_dict(mine)  # loads unchanged into an ordinary model


class _CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _step_ops(k: int, variant: dict) -> list[str]:
    """A step's dispatched operations on the path every accelerator takes (a CPU steps member by member on purpose:
    ablate.model.member_loop)."""
    from ablate.training.member_adam import MemberAdam, noam_rates

    torch.manual_seed(0)
    cfg = tiny_model(dropout=0.1, **variant)
    group = build_transformer(cfg, VOCAB, members=k).train()
    for m in group.modules():
        if hasattr(m, "set_member_rates"):
            m.set_member_rates(torch.linspace(0.05, 0.2, k))
    opt = MemberAdam(
        group.parameters(),
        members=k,
        lr=noam_rates(cfg.d_model, torch.full((k,), 10.0), torch.ones(k)),
        betas=(0.9, 0.98),
        eps=1e-9,
        clip=torch.ones(k),
    )
    torch.manual_seed(1)
    batch = collated([random_batch(b=2, s=6, t=5) for _ in range(k)])[1]
    with _CountOps() as counter, pytest.MonkeyPatch.context() as patch:
        batched_everywhere(patch)
        loss, _, ntok = member_translation_loss(group, batch, torch.full((k,), 0.1))
        (loss / ntok).sum().backward()
        opt.step()
        opt.zero_grad()
    return counter.ops


@pytest.mark.parametrize("variant", VARIANTS[:4], ids=lambda v: "-".join(map(str, v.values())) or "base")
def test_a_training_step_dispatches_the_same_operations_for_8_members_as_for_1(variant):
    one, eight = _step_ops(1, variant), _step_ops(8, variant)
    assert len(one) > 100
    assert eight == one


def test_a_plugin_kernel_with_parameters_but_no_member_axis_is_refused_naming_it():
    class Gated(AttentionKernel):
        def __init__(self, *, heads: int, d_k: int, dropout: float = 0.0):
            super().__init__()
            self.gate = torch.nn.Parameter(torch.ones(heads))

        def forward(self, q, k, v, mask, scale):
            return ATTENTION["scaled_dot_product"](heads=1, d_k=1)(q, k, v, mask, scale)

    with restoring(ATTENTION):
        register(ATTENTION, "gated_test")(Gated)
        build_transformer(tiny_model(attention="gated_test"), VOCAB)  # an ordinary model builds
        with pytest.raises(ValueError, match="model.attention=gated_test has parameters but takes no `members`"):
            build_transformer(tiny_model(attention="gated_test"), VOCAB, members=2)
