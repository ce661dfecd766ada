"""Adam for a member model: one update of all members' parameters, each member with its own learning rate schedule,
step count and bias correction, gradient clipping, and a freeze.

Every parameter carries a leading member axis K (ablate.model.members). Per-member quantities are (K,) tensors
broadcast over the rest, so an update dispatches the same operations for any K. Member k's state is exactly what
torch.optim.Adam keeps for its own run (`step`, `exp_avg`, `exp_avg_sq`), so `member_optimizer_state` gives an ordinary
checkpoint's optimizer state, and an update is torch's single-tensor Adam (and Lightning's norm clipping) member by
member.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

Schedule = Callable[[Tensor], Tensor]  # (K,) float64 step numbers, counted from 1 -> (K,) learning rates


def noam_rates(d_model: int, warmup: Tensor, scale: Tensor) -> Schedule:
    """Per member, lr = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (Eq. 3), as
    ablate.training.module.noam_factor for one run."""
    warmup, scale = warmup.double(), scale.double()

    def rates(steps: Tensor) -> Tensor:
        s = steps.clamp(min=1).to(warmup.device)
        return scale * d_model**-0.5 * torch.minimum(s.rsqrt(), s * warmup.pow(-1.5))

    return rates


class MemberAdam(torch.optim.Optimizer):
    """Adam (with L2 weight decay, as torch.optim.Adam) over parameters with a leading member axis of size K.

    lr: the schedule, from each member's step number to its learning rate.
    clip: per-member max gradient norm (K,), 0 = no clipping for that member; None = none for any.
    `active` (K,) bool: a member set False is frozen: its weights, moments and step count stay as they are.
    """

    def __init__(
        self,
        params,
        *,
        members: int,
        lr: Schedule,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        clip: Tensor | None = None,
    ):
        super().__init__(params, {"betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})
        self.members, self.schedule = members, lr
        self.clip = None if clip is None else clip.double()
        self.active = torch.ones(members, dtype=torch.bool)  # on the host: reading it never waits for the device
        self._on_device: dict[str, Tensor] = {}  # active and clip where the parameters are, copied once
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() == 0 or p.size(0) != members:
                    raise ValueError(f"a parameter of shape {tuple(p.shape)} has no leading member axis of size {members}")

    def freeze(self, member: int) -> None:
        self.active[member] = False
        self._on_device.pop("active", None)

    def active_on(self, device: torch.device) -> Tensor:
        """`active` on `device`, copied once per freeze (a copy every step would make the step wait for the host)."""
        return self._device_copy("active", self.active, device)

    def _device_copy(self, name: str, value: Tensor, device: torch.device) -> Tensor:
        if name not in self._on_device or self._on_device[name].device != device:
            self._on_device[name] = value.to(device)
        return self._on_device[name]

    def steps(self) -> Tensor:
        """(K,) float64 on the host: the updates each member has taken (its run's Adam `step`; zeros before any)."""
        p = next(p for g in self.param_groups for p in g["params"])
        state = self.state.get(p)
        return state["step"].cpu() if state else torch.zeros(self.members, dtype=torch.float64)

    def last_rates(self) -> Tensor:
        """(K,) the learning rate each member's latest step used (of its next step before any)."""
        return self.schedule(self.steps().clamp(min=1)).cpu()

    def _clip_coefficients(self, grads: list[Tensor]) -> Tensor | None:
        """(K,) factors that scale each member's gradients to at most its max norm, as clip_grad_norm_ does per run."""
        if self.clip is None:
            return None
        squares = torch.stack([g.flatten(1).double().pow(2).sum(1) for g in grads]).sum(0)  # (K,)
        clip = self._device_copy("clip", self.clip, squares.device)
        coef = (clip / (squares.sqrt() + 1e-6)).clamp(max=1.0)
        return torch.where(clip > 0, coef, torch.ones_like(coef))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            beta1, beta2 = group["betas"]
            device = params[0].device
            active = self._device_copy("active", self.active, device)
            coef = self._clip_coefficients([p.grad for p in params])
            # Per-member scalars in float64, as torch computes them in Python for one run; all (K,).
            first = self.state[params[0]]
            before = first["step"].to(device) if "step" in first else torch.zeros(self.members, dtype=torch.float64, device=device)
            steps = before + active
            lr = self.schedule(steps).to(device)
            bias1, bias2 = 1 - beta1**steps, 1 - beta2**steps
            zero, one = torch.zeros_like(lr), torch.ones_like(lr)  # float64 operands: where() of Python floats is float32
            scalars = {
                "step_size": torch.where(active, lr / bias1.clamp(min=1e-300), zero),
                "bias2_sqrt": torch.where(active, bias2.clamp(min=1e-300).sqrt(), one),
                "clip": one if coef is None else coef.to(device),
            }
            frozen = not bool(self.active.all())  # a host tensor: no device sync
            if frozen:  # moments of a frozen member stay: per-member decay factors, 0 where frozen
                scalars |= {"decay1": torch.where(active, one * (1 - beta1), zero), "keep2": torch.where(active, one * beta2, one),
                            "add2": torch.where(active, one * (1 - beta2), zero), "live": torch.where(active, one, zero)}  # fmt: skip
            views: dict[tuple, dict[str, Tensor]] = {}  # each (dtype, ndim)'s broadcastable (K, 1, ...) copies, made once
            per, exp_avgs, exp_avg_sqs = [], [], []  # each parameter's
            for p in params:
                state = self.state[p]
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] = steps
                key = (p.dtype, p.dim())
                if key not in views:
                    shape = (self.members,) + (1,) * (p.dim() - 1)
                    views[key] = {name: t.to(p.dtype).view(shape) for name, t in scalars.items()}
                per.append(views[key])
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
            # One foreach call per operation over every parameter, each tensor's arithmetic exactly the loop's: on a GPU
            # a parameter-by-parameter loop launched ~9 kernels a parameter from Python, where fused Adam launches two.
            grads = [p.grad for p in params]
            if coef is not None:
                grads = torch._foreach_mul(grads, [v["clip"] for v in per])
            if group["weight_decay"]:
                grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
            if frozen:
                # A frozen member's gradient may be non-finite (it diverged): it must not reach its moments.
                grads = [torch.where(v["live"] > 0, g, torch.zeros_like(g)) for g, v in zip(grads, per)]
                torch._foreach_lerp_(exp_avgs, grads, [v["decay1"].expand_as(g) for g, v in zip(grads, per)])
                torch._foreach_mul_(exp_avg_sqs, [v["keep2"] for v in per])
                torch._foreach_addcmul_(exp_avg_sqs, grads, torch._foreach_mul(grads, [v["add2"] for v in per]))
            else:  # torch.optim.Adam's own arithmetic
                torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
                torch._foreach_mul_(exp_avg_sqs, beta2)
                torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
            denoms = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(denoms, [v["bias2_sqrt"] for v in per])
            torch._foreach_add_(denoms, group["eps"])
            updates = torch._foreach_div(exp_avgs, denoms)
            torch._foreach_mul_(updates, [v["step_size"] for v in per])
            torch._foreach_sub_(params, updates)
        return loss


def member_optimizer_state(optimizer: MemberAdam, k: int) -> dict:
    """Member k's optimizer state as torch.optim.Adam's state_dict() for its own model holds it (same parameter order):
    a run's Adam, lr 1.0 scaled by its LambdaLR, whose group holds the rate of the next step."""
    state = optimizer.state_dict()
    rate = float(optimizer.schedule(optimizer.steps().double() + 1)[k])  # (K,) in, each member its own warmup and scale
    per_param = {}
    for index, s in state["state"].items():
        per_param[index] = {
            "step": s["step"][k].to(torch.float32).cpu(),
            "exp_avg": s["exp_avg"][k].clone(),
            "exp_avg_sq": s["exp_avg_sq"][k].clone(),
        }
    groups = []
    for g in state["param_groups"]:
        adam = torch.optim.Adam([torch.zeros(1)], lr=1.0, betas=g["betas"], eps=g["eps"], weight_decay=g["weight_decay"])
        groups.append({**adam.param_groups[0], "lr": rate, "initial_lr": 1.0, "params": g["params"]})
    return {"state": per_param, "param_groups": groups}
