"""MemberTraining against independent runs: each member must train as its own `ablate train` run does.

A reference run here is what TranslationModule and Lightning do per step: the run's seed, then the builder; the
loss over real target tokens; Lightning's norm clipping; torch.optim.Adam with the inverse-sqrt schedule
(LambdaLR). Members have distinct seeds, distinct values of every member-able key but dropout (random masks cannot
match an independent run's; the dropout rates are checked in test_dropout) and their own batches, of different shapes.
"""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, random_batch, tiny_model

from ablate.config import ExperimentConfig, TrainConfig
from ablate.data.batching import collate
from ablate.data.member_batches import collate_members
from ablate.messages.errors import ConfigError
from ablate.model.loss import translation_loss
from ablate.model.members import stack_state_dicts
from ablate.training.member_adam import MemberAdam
from ablate.training.member_training import MemberTraining, initial_weights
from ablate.training.module import noam_factor

# Per member: seed, lr_scale, warmup, clip_grad (0 = off; 0.05 binds from the first step), label_smoothing.
MEMBERS = [(1, 1.0, 8, 0.0, 0.1), (7, 2.0, 4, 0.05, 0.0), (3, 0.5, 16, 1.0, 0.2), (11, 1.5, 2, 0.3, 0.05)]


def configs(lr: float = 1.0, **model) -> list[ExperimentConfig]:
    """The members above; `lr` multiplies every lr_scale (at 1 the tiny model's peak rates are 0.03-0.26)."""
    out = []
    for seed, scale, warmup, clip, smoothing in MEMBERS:
        train = TrainConfig(lr_scale=lr * scale, warmup=warmup, clip_grad=clip, label_smoothing=smoothing, betas=[0.9, 0.98], eps=1e-9)
        out.append(ExperimentConfig(model=tiny_model(**model), train=train, seed=seed, out_dir=f"runs/m{seed}"))
    return out


class Reference:
    """One run as TranslationModule under Lightning trains it."""

    def __init__(self, cfg: ExperimentConfig, dtype: torch.dtype):
        from ablate.model import build_transformer

        self.cfg = cfg
        self.model = build_transformer(cfg.model, VOCAB).to(dtype)
        self.model.load_state_dict(initial_weights(cfg, VOCAB))
        t = cfg.train
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1.0, betas=tuple(t.betas), eps=t.eps)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: noam_factor(s + 1, cfg.model.d_model, t.warmup, t.lr_scale))

    def step(self, batch: dict) -> torch.Tensor:
        loss, _, ntok = translation_loss(self.model, batch, self.cfg.train.label_smoothing)
        loss = loss / ntok
        loss.backward()
        if self.cfg.train.clip_grad:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip_grad)
        self.opt.step()
        self.schedule.step()
        self.opt.zero_grad()
        return loss.detach()


def step_batches(step: int, k: int) -> list[list]:
    """Each member's own batch at `step`: its own sentences and shape."""
    g = torch.Generator().manual_seed(1000 * step + 17)
    out = []
    for i in range(k):
        b, s, t = 2 + (i + step) % 3, 5 + (i * 3 + step) % 6, 4 + (i + 2 * step) % 5
        src = torch.randint(4, VOCAB, (b, s), generator=g)
        tgt = torch.randint(4, VOCAB, (b, t), generator=g)
        for row in range(1, b):
            src[row, s - row :] = 0
            tgt[row, t - row :] = 0
        out.append([(row, src[row][src[row] != 0].numpy(), tgt[row][tgt[row] != 0].numpy()) for row in range(b)])
    return out


def load_member_states(optimizer: MemberAdam, states: list[dict]) -> None:
    """Give each member of `optimizer` its state from its own run's torch.optim.Adam state dict (same parameter order):
    a group started from runs some steps in."""
    assert len(states) == optimizer.members
    stacked = {}
    for i in states[0]["state"]:
        per = [s["state"][i] for s in states]
        stacked[i] = {
            "step": torch.tensor([float(p["step"]) for p in per], dtype=torch.float64),
            "exp_avg": torch.stack([p["exp_avg"] for p in per]),
            "exp_avg_sq": torch.stack([p["exp_avg_sq"] for p in per]),
        }
    optimizer.load_state_dict({**optimizer.state_dict(), "state": stacked})


def run_both(steps: int, dtype: torch.dtype, lr: float = 1.0, **model):
    cfgs = configs(lr, **model)
    group = MemberTraining(cfgs, VOCAB, dtype=dtype)
    refs = [Reference(c, dtype) for c in cfgs]
    history = []
    for step in range(steps):
        samples = step_batches(step, len(cfgs))
        mine = group.step(collate_members(samples))
        theirs = torch.stack([ref.step(collate(s)) for ref, s in zip(refs, samples)])
        history.append((mine, theirs))
    return group, refs, history


def comparable(name: str, value: torch.Tensor, cfg: ExperimentConfig) -> torch.Tensor:
    """`value` without the key projection's bias: its gradient is zero in exact arithmetic (a softmax does not change
    when one constant is added to every logit of a query), so in fp32 it is rounding noise, which Adam divides by its
    own size: its update is noise in any two runs whose sums round differently. The fp64 test covers it."""
    if not name.endswith("in_proj.bias"):
        return value
    d_k = cfg.model.head_dims[0]
    q_dim, k_dim = cfg.model.heads * d_k, (cfg.model.kv_heads or cfg.model.heads) * d_k
    return torch.cat([value[:q_dim], value[q_dim + k_dim :]])


def test_one_float32_step_from_identical_state_updates_every_member_as_its_own_run():
    """From a state three steps in (Adam's first step is lr * sign(g), which turns any rounding into a full step), at
    the paper's scale of learning rate (peak 7e-4 for the base model; here 1e-3 to 4e-3). Adam divides each gradient
    by its own running size, so where a gradient is nearly zero its rounding becomes up to a step of lr: at the tiny
    model's own rates (0.25) that alone moved single weights by 8e-6 apart in fp32."""
    cfgs = configs(lr=0.015)
    refs = [Reference(c, torch.float32) for c in cfgs]
    for step in range(3):
        for ref, samples in zip(refs, step_batches(step, len(cfgs))):
            ref.step(collate(samples))
    group = MemberTraining(cfgs, VOCAB)
    group.model.load_state_dict(stack_state_dicts([ref.model.state_dict() for ref in refs]))
    load_member_states(group.optimizer, [ref.opt.state_dict() for ref in refs])
    samples = step_batches(3, len(cfgs))
    mine = group.step(collate_members(samples))
    theirs = torch.stack([ref.step(collate(s)) for ref, s in zip(refs, samples)])
    torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=0)
    for k, (ref, cfg) in enumerate(zip(refs, cfgs)):
        weights = group.member_weights(k)
        for name, p in ref.model.state_dict().items():
            mine_p, theirs_p = comparable(name, weights[name], cfg), comparable(name, p, cfg)
            torch.testing.assert_close(mine_p, theirs_p, rtol=1e-5, atol=1e-7, msg=f"member {k}: {name}")


def test_the_member_optimizer_state_is_each_runs_own_adam_state():
    group, refs, _ = run_both(3, torch.float64, lr=0.015, attention_scaling="learned")
    for k, ref in enumerate(refs):
        mine, theirs = group.member_optimizer(k), ref.opt.state_dict()
        assert mine["state"].keys() == theirs["state"].keys()
        for i, s in theirs["state"].items():
            assert float(mine["state"][i]["step"]) == float(s["step"]) == 3.0
            torch.testing.assert_close(mine["state"][i]["exp_avg"], s["exp_avg"], rtol=1e-7, atol=1e-15)
            torch.testing.assert_close(mine["state"][i]["exp_avg_sq"], s["exp_avg_sq"], rtol=1e-7, atol=1e-20)
        assert mine["param_groups"] == theirs["param_groups"]  # lr (the next step's rate), initial_lr, betas, flags
        # A run's Adam loaded with it takes the step the run's own would: the same weights, not just a load that passes.
        twin = Reference(ref.cfg, torch.float64)
        twin.model.load_state_dict(ref.model.state_dict())
        twin.opt.load_state_dict(mine)
        batch = collate(step_batches(7, 1)[0])
        for run in (ref, twin):
            translation_loss(run.model, batch, 0.0)[0].backward()
            run.opt.step()
        for (name, a), b in zip(ref.model.state_dict().items(), twin.model.state_dict().values()):
            torch.testing.assert_close(b, a, rtol=1e-7, atol=1e-9, msg=name)  # an update is ~7e-4


@pytest.mark.slow
@pytest.mark.parametrize(
    "model", [{}, {"attention": "additive", "positional": "t5_bias", "attention_scaling": "learned"}], ids=["base", "params-everywhere"]
)
def test_100_float64_steps_give_each_member_its_own_runs_losses(model):
    _, _, history = run_both(100, torch.float64, **model)
    for step, (mine, theirs) in enumerate(history):
        torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=0, msg=f"step {step}")
    assert history[-1][1].mean() < 0.9 * history[0][1].mean()  # they trained (on random tokens: the unigram rates)


def test_a_frozen_member_keeps_its_weights_and_moments_while_the_others_train_on():
    cfgs = configs(lr=0.015)
    group = MemberTraining(cfgs, VOCAB, dtype=torch.float64)
    refs = [Reference(c, torch.float64) for c in cfgs]
    for step in range(4):
        samples = step_batches(step, len(cfgs))
        if step == 2:
            group.optimizer.freeze(1)
            frozen_weights = {k: v.clone() for k, v in group.member_weights(1).items()}
            frozen_state = group.member_optimizer(1)
        group.step(collate_members(samples))
        for k, ref in enumerate(refs):
            if k != 1 or step < 2:
                ref.step(collate(samples[k]))
    for name, value in group.member_weights(1).items():
        assert torch.equal(value, frozen_weights[name]), name
    for i, s in group.member_optimizer(1)["state"].items():
        assert float(s["step"]) == 2.0
        assert torch.equal(s["exp_avg"], frozen_state["state"][i]["exp_avg"])
    for k in (0, 2, 3):
        for name, p in refs[k].model.state_dict().items():
            mine_p, theirs_p = comparable(name, group.member_weights(k)[name], cfgs[k]), comparable(name, p, cfgs[k])
            torch.testing.assert_close(mine_p, theirs_p, rtol=1e-9, atol=1e-12)


def test_members_that_differ_in_a_key_that_is_not_member_able_are_refused_naming_it():
    cfgs = configs()
    cfgs[2].model.d_ff = 64
    with pytest.raises(ConfigError, match=r"model.d_ff differs between members \(32 vs 64\)"):
        MemberTraining(cfgs, VOCAB)
    cfgs = configs()
    for c in cfgs:
        c.train.precision = "16-mixed"
    with pytest.raises(ConfigError, match="16-mixed"):
        MemberTraining(cfgs, VOCAB)


def test_a_member_batch_counts_each_members_own_tokens_and_the_padding_it_adds():
    samples = step_batches(0, 3)
    batch = collate_members(samples)
    singles = [collate(s) for s in samples]
    assert batch["member_tokens"].tolist() == [s["tgt_tokens"] for s in singles]
    b = max(s["src"].size(0) for s in singles)
    assert batch["src"].size(0) == 3 * b
    for k, single in enumerate(singles):  # member k's real targets, found through its row of the (K, M) index
        n = single["tgt_tokens"]
        assert torch.equal(batch["tgt_out"].flatten()[batch["keep_index"][k, :n]], single["target"])
        assert batch["slot_weight"][k, :n].eq(1).all() and batch["slot_weight"][k, n:].eq(0).all()
    real = sum(int((s["src"] != 0).sum()) + s["tgt_tokens"] for s in singles)
    assert batch["padded"] == pytest.approx(1 - real / (batch["src"].numel() + batch["tgt_out"].numel()))
    assert random_batch  # the helper batches above are built the same way
