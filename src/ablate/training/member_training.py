"""`MemberTraining`: K runs of one architecture trained as one member model (ablate.model.members).

Member k starts from exactly the weights its own run would build (the run's seed, then the builder) and trains with
its own learning-rate schedule, clipping, label smoothing and dropout rate (ablate.config.members). A step is one
forward and backward pass over every member's own batch (ablate.data.member_batches) and one MemberAdam update.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ablate.config import ExperimentConfig
from ablate.config.members import member_values
from ablate.model import build_transformer
from ablate.model.dropout import Dropout
from ablate.model.member_loss import member_translation_loss
from ablate.model.members import member_state_dict, stack_state_dicts
from ablate.training.member_adam import MemberAdam, member_optimizer_state, noam_rates


def initial_weights(cfg: ExperimentConfig, vocab_size: int) -> dict[str, Tensor]:
    """The weights `ablate train` starts run `cfg` from: its seed, then the builder (all that draws before it)."""
    torch.manual_seed(cfg.seed)
    return build_transformer(cfg.model, vocab_size).state_dict()


def build_member_model(
    configs: list[ExperimentConfig], vocab_size: int, device: str | torch.device | None = None, dtype: torch.dtype | None = None
) -> torch.nn.Module:
    """The member model of `configs` on `device` in `dtype`: member k starts from run k's own initial weights and
    drops out at its own `model.dropout`. The one recipe for `ablate train --members` (MemberModule) and the
    equivalence tests and benchmarks (MemberTraining), so what those check is what a group trains."""
    values = member_values(configs)  # refuses a group whose members differ in a key they may not
    model = build_transformer(configs[0].model, vocab_size, members=len(configs))
    model.load_state_dict(stack_state_dicts([initial_weights(c, vocab_size) for c in configs]))
    model.to(device=device, dtype=dtype)
    rates = torch.tensor(values["model.dropout"], dtype=torch.float32, device=next(model.parameters()).device)
    for module in model.modules():
        if isinstance(module, Dropout):
            module.set_member_rates(rates)
    return model


def member_objective(model: torch.nn.Module, batch: dict, smoothing: Tensor, active: Tensor) -> tuple[Tensor, ...]:
    """One forward pass of every member: the sum to backpropagate (each active member's mean smoothed loss; a frozen
    member, stopped or diverged with non-finite weights, adds nothing, as where() passes it no gradient), then per
    member (K,) that mean loss, the summed NLL and the real target tokens. Members share no parameter, so each
    member's gradient is its own loss's. The one step of `ablate train --members` (MemberModule) and of MemberTraining."""
    loss, nll, ntok = member_translation_loss(model, batch, smoothing)
    per_token = loss / ntok.to(loss.dtype).clamp(min=1)  # (K,)
    return torch.where(active, per_token, torch.zeros_like(per_token)).sum(), per_token, nll, ntok


def member_adam(params, configs: list[ExperimentConfig], device: torch.device) -> MemberAdam:
    """MemberAdam over `params` with each member's own schedule (warmup, lr_scale) and gradient clipping."""
    values, t = member_values(configs), configs[0].train
    clip = torch.tensor(values["train.clip_grad"], dtype=torch.float64)
    warmup = torch.tensor(values["train.warmup"], dtype=torch.float64, device=device)
    scale = torch.tensor(values["train.lr_scale"], dtype=torch.float64, device=device)
    return MemberAdam(
        params,
        members=len(configs),
        lr=noam_rates(configs[0].model.d_model, warmup, scale),
        betas=tuple(t.betas),
        eps=t.eps,
        weight_decay=t.weight_decay,
        clip=clip if bool((clip > 0).any()) else None,
    )


class MemberTraining:
    """The member model, each member's loss knobs and the optimizer, on `device` in `dtype`: a group's step without
    Lightning, for the equivalence tests and benchmarks."""

    def __init__(
        self, configs: list[ExperimentConfig], vocab_size: int, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
    ):
        self.configs, self.members = configs, len(configs)
        self.model = build_member_model(configs, vocab_size, device, dtype)
        self.device = next(self.model.parameters()).device
        smoothing = member_values(configs)["train.label_smoothing"]
        self.smoothing = torch.tensor(smoothing, dtype=torch.float64, device=self.device)
        self.optimizer = member_adam(self.model.parameters(), configs, self.device)

    def loss(self, batch: dict) -> tuple[Tensor, Tensor, Tensor]:
        """Per member (K,): summed smoothed loss, summed NLL, real target tokens."""
        return member_translation_loss(self.model, batch, self.smoothing)

    def step(self, batch: dict) -> Tensor:
        """One update of every active member on its own rows of `batch`; each member's mean smoothed loss (K,)."""
        self.model.train()
        total, per_token, _, _ = member_objective(self.model, batch, self.smoothing, self.optimizer.active_on(self.device))
        total.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return per_token.detach()

    def member_weights(self, k: int) -> dict[str, Tensor]:
        """Member k's weights as its own run's model saves them."""
        return member_state_dict(self.model.state_dict(), k)

    def member_optimizer(self, k: int) -> dict:
        """Member k's Adam state as its own run's torch.optim.Adam saves it."""
        return member_optimizer_state(self.optimizer, k)
