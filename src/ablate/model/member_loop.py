"""On CPU a member model steps one member after another through the ordinary model's code.

A CPU step is compute-bound: one batched matmul over K members costs what K small ones do, so batching buys nothing
there, and it costs twice. Every member's batch is padded to the group's shape (at 8 members of table3-small, the
default length tolerance pads 8.8% of a step's positions against a run's 4.1%), and K members' activations (the
feed-forward's hidden state, the attention's inputs) leave the cache where one run's stay in it. Batched, 8 members
trained at 0.76x the speed of their 8 runs one after another (0.94x with CPU-only loss and feed-forward paths, since
removed); member by member, 1.00x (docs/members.md): each member's forward and backward are its own run's, on its own
rows and lengths, and only the optimizer update stays one for all members.

Member k runs through `run_model(model)`, an ordinary Transformer built on the meta device (no storage of its own),
with member k's slices of the group's parameters swapped in for the call (`torch.func.functional_call`): gradients
flow back into the group's stacked parameters, and the group's buffers (positional tables) are used, so device and
dtype follow the group. Member k's dropout rate is set on the run model's dropout layers for its call. Accelerators
take the batched path (ablate.model.member_loss), whose operations do not depend on K. `train.compile` compiles the
member model, which a CPU step does not call: on CPU, members train eagerly.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ablate.model.dropout import Dropout
from ablate.model.loss import translation_loss
from ablate.model.tokens import PAD_ID


def member_by_member(src: Tensor) -> bool:
    """Whether a member model steps member by member on `src`: on CPU (and not inside a compiled region)."""
    return src.device.type == "cpu" and not torch.compiler.is_compiling()


class _RunLoss(nn.Module):
    """`translation_loss` as a module's forward, so `functional_call` swaps member k's weights in for all of it (the
    loss reads the output weight itself)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: dict, smoothing: float) -> tuple[Tensor, Tensor, Tensor]:
        return translation_loss(self.model, batch, smoothing)


def member_batch(batch: dict, k: int, members: int) -> dict | None:
    """Member k's own batch out of a member batch: its rows, without the rows and columns of padding the other members'
    batches added (None when it has no sentence)."""
    rows = batch["src"].size(0) // members
    src, tgt_in, tgt_out = (batch[key][k * rows : (k + 1) * rows] for key in ("src", "tgt_in", "tgt_out"))
    real = (src != PAD_ID).any(1)
    n = int(real.sum())
    if n == 0:
        return None
    s, t = int((src[:n] != PAD_ID).sum(1).max()), int((tgt_in[:n] != PAD_ID).sum(1).max())
    return {"src": src[:n, :s], "tgt_in": tgt_in[:n, :t], "tgt_out": tgt_out[:n, :t]}


def looped_member_loss(model: nn.Module, batch: dict, smoothing: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """`member_translation_loss` member by member: each member's summed smoothed loss, summed NLL and real target
    tokens (K,), each computed as its own run computes them."""
    run = run_model(model)
    run.train(model.training)
    members = batch["member_tokens"].numel()
    # Every name of every weight, tied ones included (functional_call's own tying loses them once buffers are given),
    # each weight unbound once, so its backward stacks the K gradients once.
    unbound: dict[int, tuple[Tensor, ...]] = {}
    slices = {name: unbound.setdefault(id(p), p.unbind(0)) for name, p in model.named_parameters(remove_duplicate=False)}
    buffers = {name: b for name, b in model.named_buffers(remove_duplicate=False) if name in run._buffer_names}
    dropouts = [
        (run.get_submodule(name), [m.p] * members if m.rates is None else m.rates.tolist())
        for name, m in model.named_modules()
        if isinstance(m, Dropout)
    ]
    wrapper = _RunLoss(run)
    eps = smoothing.tolist()
    losses: list[Tensor | None] = []
    nlls: list[Tensor | None] = []
    for k in range(members):
        own = member_batch(batch, k, members)
        if own is None:  # no sentence this step: no loss, and no gradient for its weights
            losses.append(None)
            nlls.append(None)
            continue
        for layer, rates in dropouts:
            layer.p = rates[k]
        weights = {f"model.{name}": views[k] for name, views in slices.items()}
        weights.update({f"model.{name}": b for name, b in buffers.items()})
        loss, nll, _ = functional_call(wrapper, weights, (own, eps[k]), tie_weights=False, strict=True)
        losses.append(loss)
        nlls.append(nll)
    like = next((x for x in losses if x is not None), None)
    if like is None:
        raise ValueError("a member batch without a sentence for any member")
    return _stack(losses, like), _stack(nlls, like), batch["member_tokens"]


def _stack(values: list[Tensor | None], like: Tensor) -> Tensor:
    return torch.stack([like.new_zeros(()) if x is None else x for x in values])


def run_model(model: nn.Module) -> nn.Module:
    """The ordinary Transformer a member model's members run through on CPU (built by ablate.model.build)."""
    run = getattr(model, "run_model", None)
    if run is None:
        raise ValueError("this member model has no run model: build it with ablate.model.build_transformer(..., members=K)")
    return run


def attach_run_model(model: nn.Module, run: nn.Module) -> None:
    """Give the member model `model` its run model `run` (built on the meta device), not as a submodule: it has no
    parameters, state or device of its own. Checks once that every weight of `run` is a member slice of `model`'s."""
    params = dict(model.named_parameters(remove_duplicate=False))
    members = next(iter(params.values())).size(0)
    for name, p in run.named_parameters(remove_duplicate=False):
        if name not in params or params[name].shape != (members, *p.shape):
            found = f"of shape {tuple(params[name].shape)}" if name in params else "missing"
            raise ValueError(
                f"a member model's weights must be the ordinary model's with a leading member axis: {name} is {found} "
                f"in the member model of {members}, of shape {tuple(p.shape)} in the ordinary one"
            )
    own, buffers = dict(model.named_buffers(remove_duplicate=False)), dict(run.named_buffers(remove_duplicate=False))
    run._buffer_names = frozenset(name for name, b in buffers.items() if b is not None)
    for name in run._buffer_names:
        if name not in own or own[name].shape != buffers[name].shape:
            raise ValueError(f"the run model's buffer {name} is not one the member model shares between its members")
    object.__setattr__(model, "run_model", run)
