"""On CPU a member model steps member by member through its run model (ablate.model.member_loop): each member is
bitwise its own run on its own batch, at its own dropout rate, and the run model holds no member's tensors between
steps."""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, tiny_model
from member_models import collated, members_of, own_batches

import ablate.model.member_loop
from ablate.model import build_transformer
from ablate.model.attention import ATTENTION, AttentionKernel
from ablate.model.loss import translation_loss
from ablate.model.member_loop import run_model
from ablate.model.member_loss import member_translation_loss
from ablate.registry import register, restoring


def test_a_member_aware_plugin_whose_weights_are_not_its_ordinary_ones_with_a_member_axis_is_refused_naming_them():
    """A CPU swaps member k's slices into the ordinary variant, so a member variant's weights must be the ordinary
    variant's, by name, with a leading K."""

    class Gated(AttentionKernel):
        options = ("members",)

        def __init__(self, *, heads: int, d_k: int, dropout: float = 0.0, members: int | None = None):
            super().__init__()
            if members is None:
                self.gate = torch.nn.Parameter(torch.ones(heads))
            else:
                self.gates = torch.nn.Parameter(torch.ones(members, heads))  # another name: not member slices

        def forward(self, q, k, v, mask, scale):
            return ATTENTION["scaled_dot_product"](heads=1, d_k=1)(q, k, v, mask, scale)

    with restoring(ATTENTION):
        register(ATTENTION, "gated_members_test")(Gated)
        with pytest.raises(ValueError, match=r"encoder\.0\.self_attn\.kernel\.gate is missing in the member model of 2, of shape \(4,\)"):
            build_transformer(tiny_model(attention="gated_members_test"), VOCAB, members=2)


def test_on_cpu_each_member_is_exactly_its_own_run_on_its_own_batch(monkeypatch):
    """Member by member, each member computes what its run computes, bitwise, on its own batch's shape: no rows or
    columns of the other members' padding."""
    plains, group = members_of(tiny_model(), 3, dtype=torch.float32)
    singles, batch = collated(own_batches(3))
    shapes = []
    loss_of = ablate.model.member_loop.translation_loss
    monkeypatch.setattr(ablate.model.member_loop, "translation_loss", lambda m, b, e: shapes.append(b["src"].shape) or loss_of(m, b, e))
    smoothing = torch.tensor([0.0, 0.1, 0.3], dtype=torch.float64)
    loss, nll, ntok = member_translation_loss(group, batch, smoothing)
    (loss / ntok).sum().backward()
    assert shapes == [single["src"].shape for single in singles] and len(set(shapes)) == 3
    grads = dict(group.named_parameters())
    for k, (plain, single) in enumerate(zip(plains, singles)):
        ref_loss, ref_nll, ref_ntok = translation_loss(plain, single, float(smoothing[k]))
        (ref_loss / ref_ntok).backward()
        assert torch.equal(loss[k], ref_loss.to(loss.dtype)) and torch.equal(nll[k], ref_nll.to(nll.dtype)), k
        for name, p in plain.named_parameters():
            assert torch.equal(grads[name].grad[k], p.grad), f"member {k}: {name}"


def test_on_cpu_each_member_drops_out_at_its_own_rate():
    """Member k's dropout layers take its own `model.dropout` for its call: rate 0 is its run without dropout."""
    plains, group = members_of(tiny_model(dropout=0.1), 2, dtype=torch.float32)
    for m in group.modules():
        if hasattr(m, "set_member_rates"):
            m.set_member_rates(torch.tensor([0.0, 0.5]))
    singles, batch = collated(own_batches(2))
    loss, _, _ = member_translation_loss(group.train(), batch, torch.zeros(2))
    still = translation_loss(plains[0].eval(), singles[0], 0.0)[0]
    assert torch.equal(loss[0], still)  # no dropout at rate 0, even in training mode
    assert not torch.allclose(loss[1], translation_loss(plains[1].eval(), singles[1], 0.0)[0])  # rate 0.5 drops


def test_the_run_model_holds_no_members_tensors_between_steps_not_even_after_an_error(monkeypatch):
    """Member k's weights are put into the run model for its call only: afterwards, and after a failed call, the run
    model holds its own meta tensors again (no member's weights, nor the autograd graph behind them)."""
    _, group = members_of(tiny_model(positional="sinusoidal"), 2, dtype=torch.float32)
    run = run_model(group)
    _, batch = collated(own_batches(2))

    def on_meta() -> bool:
        tensors = [*run.parameters(), *run.buffers()]
        return len(tensors) > 10 and all(t.device.type == "meta" for t in tensors)

    assert on_meta()
    member_translation_loss(group, batch, torch.zeros(2))[0].sum().backward()
    assert on_meta()
    calls = []
    loss_of = ablate.model.member_loop.translation_loss

    def fails_for_member_1(model, own, eps):
        calls.append(next(model.parameters()).device.type)  # member k's weights are in place during its call
        if len(calls) == 2:
            raise RuntimeError("member 1 failed")
        return loss_of(model, own, eps)

    monkeypatch.setattr(ablate.model.member_loop, "translation_loss", fails_for_member_1)
    with pytest.raises(RuntimeError, match="member 1 failed"):
        member_translation_loss(group, batch, torch.zeros(2))
    assert calls == ["cpu", "cpu"] and on_meta()


def test_weights_replaced_after_the_model_was_built_are_the_ones_its_members_run_with():
    """Where a member's weights go is resolved once, but the weights themselves are read at every step: a member model
    given new tensors (load_state_dict with assign=True, a dtype conversion) runs on them."""
    plains, group = members_of(tiny_model(), 2, dtype=torch.float32)
    singles, batch = collated(own_batches(2))
    swapped = {k: v.flip(0) for k, v in group.state_dict().items()}  # member 0 is now run 1's weights, and 1 run 0's
    group.load_state_dict(swapped, assign=True)
    group.double()
    loss, _, _ = member_translation_loss(group, batch, torch.zeros(2, dtype=torch.float64))
    assert loss.dtype == torch.float64
    for k in range(2):
        ref = translation_loss(plains[1 - k].double(), singles[k], 0.0)[0]
        assert torch.equal(loss[k], ref), k
