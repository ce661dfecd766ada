"""On CPU a member model steps one member after another through the ordinary model's code.

A CPU step is compute-bound: one batched matmul over K members costs what K small ones do, so batching buys nothing
there, and it costs twice. Every member's batch is padded to the group's shape (at 8 members of table3-small, the
default length tolerance pads 8.8% of a step's positions against a run's 4.1%), and K members' activations (the
feed-forward's hidden state, the attention's inputs) leave the cache where one run's stay in it. Batched, 8 members
trained at 0.76x the speed of their 8 runs one after another (0.94x with CPU-only loss and feed-forward paths, since
removed); member by member, 1.00x (docs/members.md): each member's forward and backward are its own run's, on its own
rows and lengths, and only the optimizer update stays one for all members.

Member k runs through `run_model(model)`, an ordinary Transformer built on the meta device (no storage of its own),
with member k's slices of the group's parameters put in its place for the call, as `torch.func.functional_call` puts
them, but along a plan resolved once, when the run model is attached (a functional_call per member walked both module
trees every time, about 1.3 ms of Python a member: K=1 took 1.032x a run's step with it, 1.005x without). Gradients
flow back into the group's stacked parameters, and the group's buffers (positional tables) are used, so device and
dtype follow the group. Member k's dropout rate is set on the run model's dropout layers for its call. Accelerators
take the batched path (ablate.model.member_loss), whose operations do not depend on K. `train.compile` compiles the
member model, which a CPU step does not call: on CPU, members train eagerly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ablate.model.dropout import Dropout
from ablate.model.loss import translation_loss
from ablate.model.tokens import PAD_ID


def member_by_member(src: Tensor) -> bool:
    """Whether a member model steps member by member on `src`: on CPU (and not inside a compiled region)."""
    return src.device.type == "cpu" and not torch.compiler.is_compiling()


@dataclass(frozen=True)
class _Slot:
    """One tensor of the member model (`owner._parameters` or `._buffers`, at `name`) and the places in the run model
    that take it (or member k's slice of it) for a member's call: several where weights are tied."""

    owner: dict
    name: str
    places: tuple[tuple[dict, str], ...]


@dataclass(frozen=True)
class _Plan:
    """Where a member's tensors and dropout rates go in the run model, resolved once when the run model is attached:
    a step then only assigns tensors (as torch.func.functional_call does, without walking both module trees again
    for every member)."""

    weights: tuple[_Slot, ...]
    buffers: tuple[_Slot, ...]
    dropouts: tuple[tuple[nn.Module, Dropout], ...]  # (the run model's layer, the member model's)
    empty: tuple[tuple[dict, str, Tensor | None], ...]  # the run model's own (meta) tensors, put back after a step


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
    plan: _Plan = run._member_plan
    if run.training != model.training:
        run.train(model.training)
    members = batch["member_tokens"].numel()
    # Each weight unbound once, so its backward stacks the K gradients once.
    weights = [(slot.places, slot.owner[slot.name].unbind(0)) for slot in plan.weights]
    rates = [(layer, [own.p] * members if own.rates is None else own.rates.tolist()) for layer, own in plan.dropouts]
    eps = smoothing.tolist()
    losses: list[Tensor | None] = []
    nlls: list[Tensor | None] = []
    try:
        for slot in plan.buffers:
            for where, name in slot.places:
                where[name] = slot.owner[slot.name]
        for k in range(members):
            own = member_batch(batch, k, members)
            if own is None:  # no sentence this step: no loss, and no gradient for its weights
                losses.append(None)
                nlls.append(None)
                continue
            for layer, p in rates:
                layer.p = p[k]
            for places, views in weights:
                for where, name in places:
                    where[name] = views[k]
            loss, nll, _ = translation_loss(run, own, eps[k])
            losses.append(loss)
            nlls.append(nll)
    finally:  # the run model holds no member's tensors between steps (nor their autograd graphs)
        for where, name, tensor in plan.empty:
            where[name] = tensor
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
    parameters, state or device of its own. Checks once that every weight of `run` is a member slice of `model`'s and
    every buffer of `run` one `model` shares between its members, and resolves where each goes."""
    params = dict(model.named_parameters(remove_duplicate=False))
    members = next(iter(params.values())).size(0)
    for name, p in run.named_parameters(remove_duplicate=False):
        if name not in params or params[name].shape != (members, *p.shape):
            found = f"of shape {tuple(params[name].shape)}" if name in params else "missing"
            raise ValueError(
                f"a member model's weights must be the ordinary model's with a leading member axis: {name} is {found} "
                f"in the member model of {members}, of shape {tuple(p.shape)} in the ordinary one"
            )
    own = dict(model.named_buffers(remove_duplicate=False))
    buffers = [name for name, b in run.named_buffers(remove_duplicate=False) if b is not None]
    for name in buffers:
        if name not in own or own[name].shape != run.get_buffer(name).shape:
            raise ValueError(f"the run model's buffer {name} is not one the member model shares between its members")
    weights = _slots(model, run, [name for name, _ in run.named_parameters(remove_duplicate=False)], "_parameters")
    shared = _slots(model, run, buffers, "_buffers")
    dropouts = tuple((run.get_submodule(name), m) for name, m in model.named_modules() if isinstance(m, Dropout))
    empty = tuple((where, name, where[name]) for slot in weights + shared for where, name in slot.places)
    object.__setattr__(run, "_member_plan", _Plan(weights, shared, dropouts, empty))
    object.__setattr__(model, "run_model", run)


def _slots(model: nn.Module, run: nn.Module, names: list[str], kind: str) -> tuple[_Slot, ...]:
    """One slot per distinct tensor of `model` among `names` (tied names share one), with its places in `run`."""
    slots: dict[int, tuple[dict, str, list]] = {}
    for name in names:
        module, _, attr = name.rpartition(".")
        owner = getattr(model.get_submodule(module), kind)
        key = id(owner[attr])
        slots.setdefault(key, (owner, attr, []))[2].append((getattr(run.get_submodule(module), kind), attr))
    return tuple(_Slot(owner, attr, tuple(places)) for owner, attr, places in slots.values())
