"""The fused label-smoothed loss equals torch's cross entropy in value and gradient."""

import pytest
import torch
import torch.nn.functional as F

from ablate.loss import smoothed_nll


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matches_cross_entropy_value_and_gradient(smoothing, dtype):
    torch.manual_seed(0)
    logits = (3 * torch.randn(37, 101)).to(dtype).requires_grad_()
    ref_logits = logits.detach().clone().requires_grad_()
    target = torch.randint(0, 101, (37,))
    loss, nll = smoothed_nll(logits, target, smoothing)
    ref = F.cross_entropy(ref_logits.float(), target, label_smoothing=smoothing, reduction="sum")
    ref_nll = F.cross_entropy(ref_logits.detach().float(), target, reduction="sum")
    assert loss.dtype == torch.float32 and not nll.requires_grad
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(nll, ref_nll, rtol=1e-5, atol=1e-4)
    (2.5 * loss).backward()
    (2.5 * ref).backward()
    assert logits.grad.dtype == dtype
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(logits.grad.float(), ref_logits.grad.float(), rtol=tol, atol=tol)


def test_gradient_through_a_model_and_a_second_backward_is_refused():
    torch.manual_seed(0)
    w = torch.randn(8, 11, requires_grad=True)
    x, target = torch.randn(5, 8), torch.randint(0, 11, (5,))
    loss, _ = smoothed_nll(x @ w, target, 0.1)
    loss.backward(retain_graph=True)
    ref = torch.autograd.grad(F.cross_entropy(x @ w, target, label_smoothing=0.1, reduction="sum"), w)[0]
    torch.testing.assert_close(w.grad, ref)
    with pytest.raises(RuntimeError, match="backpropagated once"):
        loss.backward()
