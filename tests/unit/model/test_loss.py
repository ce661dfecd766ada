"""The fused label-smoothed loss equals torch's cross entropy in value and gradient."""

import pytest
import torch
import torch.nn.functional as F

from ablate.model.loss import smoothed_nll


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


@pytest.mark.parametrize("n", [0, 1, 300, 1000])  # none, one, and several chunks with a ragged last one
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_chunked_output_layer_loss_equals_projection_then_cross_entropy(monkeypatch, n, smoothing):
    import ablate.model.loss

    monkeypatch.setattr(ablate.model.loss, "CHUNK_ELEMENTS", 128 * 97)  # 128 rows a chunk at V = 97
    torch.manual_seed(0)
    hidden = torch.randn(n, 16, requires_grad=True)
    weight = (0.3 * torch.randn(97, 16)).requires_grad_()
    target = torch.randint(0, 97, (n,))
    loss, nll = ablate.model.loss.linear_smoothed_nll(hidden, weight, target, smoothing)
    h2, w2 = hidden.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_()
    ref = F.cross_entropy(h2 @ w2.T, target, label_smoothing=smoothing, reduction="sum") if n else (h2 @ w2.T).sum()
    ref_nll = F.cross_entropy((h2 @ w2.T).detach(), target, reduction="sum") if n else torch.tensor(0.0)
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(nll, ref_nll, rtol=1e-5, atol=1e-4)
    assert not nll.requires_grad
    (0.7 * loss).backward()
    (0.7 * ref).backward()
    torch.testing.assert_close(hidden.grad, h2.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weight.grad, w2.grad, rtol=1e-4, atol=1e-5)  # summed over chunks in another order


def test_translation_loss_takes_the_chunked_path_on_cpu_with_the_same_result():
    from helpers import random_batch, tiny_model

    from ablate.model import build_transformer
    from ablate.model.loss import translation_loss

    torch.manual_seed(0)
    model = build_transformer(tiny_model(), 32)
    src, tgt = random_batch()
    batch = {"src": src, "tgt_in": tgt, "tgt_out": torch.roll(tgt, -1, 1)}
    loss, nll, ntok = translation_loss(model, batch, 0.1)
    loss.backward()
    chunked = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    keep = batch["tgt_out"] != 0
    ref, ref_nll = smoothed_nll(model(src, tgt, keep=keep), batch["tgt_out"][keep], 0.1)
    ref.backward()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(nll, ref_nll)
    assert ntok == keep.sum()
    for name, p in model.named_parameters():
        torch.testing.assert_close(chunked[name], p.grad, rtol=1e-5, atol=1e-6, msg=name)


def test_evaluation_does_not_form_gradients(monkeypatch):
    from helpers import random_batch, tiny_model

    import ablate.model.loss
    from ablate.model import build_transformer

    def forbidden(*args):
        raise AssertionError("evaluation took the chunked path, which forms gradients")

    monkeypatch.setattr(ablate.model.loss, "linear_smoothed_nll", forbidden)
    model = build_transformer(tiny_model(), 32)
    src, tgt = random_batch()
    with torch.no_grad():
        loss, nll, _ = ablate.model.loss.translation_loss(model, {"src": src, "tgt_in": tgt, "tgt_out": tgt}, 0.1)
    assert torch.isfinite(loss) and nll > 0
