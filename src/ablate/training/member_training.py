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


class MemberTraining:
    """The member model, each member's loss knobs and the optimizer, on `device` in `dtype`."""

    def __init__(
        self, configs: list[ExperimentConfig], vocab_size: int, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
    ):
        values = member_values(configs)
        self.configs, self.members = configs, len(configs)
        cfg = configs[0]
        state = stack_state_dicts([initial_weights(c, vocab_size) for c in configs])
        self.model = build_transformer(cfg.model, vocab_size, members=self.members)
        self.model.load_state_dict(state)
        self.model.to(device=device, dtype=dtype)
        self.device = next(self.model.parameters()).device
        rates = torch.tensor(values["model.dropout"], dtype=torch.float32, device=self.device)
        for module in self.model.modules():
            if isinstance(module, Dropout):
                module.set_member_rates(rates)
        self.smoothing = torch.tensor(values["train.label_smoothing"], dtype=torch.float64, device=self.device)
        clip = torch.tensor(values["train.clip_grad"], dtype=torch.float64)
        warmup, scale = (
            torch.tensor(values["train.warmup"], dtype=torch.float64),
            torch.tensor(values["train.lr_scale"], dtype=torch.float64),
        )
        t = cfg.train
        self.optimizer = MemberAdam(
            self.model.parameters(),
            members=self.members,
            lr=noam_rates(cfg.model.d_model, warmup.to(self.device), scale.to(self.device)),
            betas=tuple(t.betas),
            eps=t.eps,
            weight_decay=t.weight_decay,
            clip=clip if bool((clip > 0).any()) else None,
        )

    def loss(self, batch: dict) -> tuple[Tensor, Tensor, Tensor]:
        """Per member (K,): summed smoothed loss, summed NLL, real target tokens."""
        return member_translation_loss(self.model, batch, self.smoothing)

    def step(self, batch: dict) -> Tensor:
        """One update of every active member on its own rows of `batch`; each member's mean smoothed loss (K,)."""
        self.model.train()
        loss, _, ntok = self.loss(batch)
        per_token = loss / ntok.to(loss.dtype).clamp(min=1)
        per_token.sum().backward()  # members share no parameter: each member's gradient is its own loss's
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return per_token.detach()

    def member_weights(self, k: int) -> dict[str, Tensor]:
        """Member k's weights as its own run's model saves them."""
        return member_state_dict(self.model.state_dict(), k)

    def member_optimizer(self, k: int) -> dict:
        """Member k's Adam state as its own run's torch.optim.Adam saves it."""
        return member_optimizer_state(self.optimizer, k)
