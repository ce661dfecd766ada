import pytest
import torch

from ablate.model.dropout import Dropout, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_mask_keeps_one_minus_p_in_every_lane(p):
    torch.manual_seed(0)
    keep = keep_mask(torch.Size([1_000_003]), p, torch.device("cpu"))  # not a multiple of 4
    assert keep.shape == (1_000_003,) and keep.dtype == torch.bool
    assert keep.float().mean().item() == pytest.approx(1 - p, abs=3e-3)
    for lane in range(4):  # each int64 draw feeds four elements; none of the four may be biased
        assert keep[lane::4].float().mean().item() == pytest.approx(1 - p, abs=5e-3)
    pairs = keep[:-3:4].float() * keep[1::4][: keep[:-3:4].numel()].float()  # neighbours from one draw: independent
    assert pairs.mean().item() == pytest.approx((1 - p) ** 2, abs=5e-3)


def test_output_is_scaled_input_or_zero_and_gradient_follows_the_mask():
    torch.manual_seed(1)
    x = torch.randn(64, 33, 17, requires_grad=True)
    y = dropout(x, 0.25, training=True)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / 0.75)
    assert 0.7 < kept.float().mean() < 0.8
    (y * 2).sum().backward()
    torch.testing.assert_close(x.grad, kept.float() * 2 / 0.75)


def test_expectation_is_preserved():
    torch.manual_seed(2)
    x = torch.full((2_000_000,), 3.0)
    assert dropout(x, 0.4, training=True).mean().item() == pytest.approx(3.0, rel=3e-3)


def test_identity_when_off_and_zero_at_p_one():
    x = torch.randn(5, 7)
    assert dropout(x, 0.3, training=False) is x
    assert dropout(x, 0.0, training=True) is x
    assert torch.equal(dropout(x, 1.0, training=True), torch.zeros_like(x))
    module = Dropout(0.3).eval()
    assert module(x) is x
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.5)


def test_seeded_runs_repeat_and_seeds_differ():
    x = torch.ones(10_000)
    masks = []
    for seed in (7, 7, 8):
        torch.manual_seed(seed)
        masks.append(dropout(x, 0.1, training=True) != 0)
    assert torch.equal(masks[0], masks[1])
    assert not torch.equal(masks[0], masks[2])


def test_each_member_drops_at_its_own_rate_and_keeps_the_expectation():
    """A member-major batch (K*B, ...): member k's rows keep 1 - rates[k] of their elements, scaled by 1/(1 - rates[k])."""
    torch.manual_seed(3)
    rates = torch.tensor([0.0, 0.1, 0.3, 0.5, 1.0])
    module = Dropout(0.1)
    module.set_member_rates(rates)
    x = torch.full((5 * 4, 500, 25), 2.0, requires_grad=True)  # 4 rows a member, 50,000 elements each
    y = module(x)
    per_member = y.detach().view(5, -1)
    kept = (per_member != 0).float().mean(1)
    torch.testing.assert_close(kept, 1 - rates, atol=0.01, rtol=0)
    torch.testing.assert_close(per_member.mean(1)[:4], torch.full((4,), 2.0), atol=0.03, rtol=0)  # p = 1 keeps nothing
    assert (per_member[4] == 0).all()
    y.sum().backward()
    torch.testing.assert_close(x.grad.view(5, -1)[1], (per_member[1] != 0).float() / 0.9)
    assert module.eval()(x) is x
    with pytest.raises(ValueError, match="dropout probabilities"):
        module.set_member_rates(torch.tensor([0.1, 1.5]))


def test_member_dropout_first_run_under_inference_mode_still_trains_after():
    """An evaluation under torch.inference_mode before the first training step (trainer.validate, a user's check)
    must not leave the cached per-member factors as inference tensors, which autograd refuses to save."""
    module = Dropout(0.1)
    module.set_member_rates(torch.tensor([0.1, 0.3]))
    with torch.inference_mode():
        module.train()(torch.ones(4, 8))
    x = torch.ones(4, 8, requires_grad=True)
    module(x).sum().backward()
    assert x.grad is not None
