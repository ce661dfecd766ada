"""The analytic FLOPs behind speed/mfu must agree with torch's own count of the matmuls the model runs."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from ablate.config import ExperimentConfig, load_config
from ablate.flops import peak_flops, train_flops
from ablate.loss import smoothed_nll
from ablate.metrics import SpeedCallback
from ablate.model import build_transformer

V = 97


@pytest.mark.parametrize("overrides", [
    [],
    ["model.heads=4", "model.kv_heads=2", "model.d_k=8", "model.d_v=12", "model.enc_layers=3", "model.dec_layers=1"],
    ["model.d_ff=40", "model.tie_embeddings=none"],
])  # fmt: skip
def test_train_flops_match_torch_flop_counter(overrides):
    cfg = load_config([], ["model.d_model=32", "model.d_ff=64", "model.heads=4", "model.enc_layers=2",
                           "model.dec_layers=2", "model.dropout=0.0", *overrides])  # fmt: skip
    torch.manual_seed(0)
    model = build_transformer(cfg.model, V)
    b, s, t = 3, 11, 9
    batch = {"src": torch.randint(4, V, (b, s)), "tgt_in": torch.randint(4, V, (b, t)),
             "tgt_out": torch.randint(4, V, (b, t))}  # fmt: skip
    batch["src_tokens"], batch["tgt_tokens"] = torch.tensor(b * s), torch.tensor(b * t)  # no padding: all counted
    # torch's counter does not see inside the fused CPU attention kernel; its math backend runs the same
    # products as bmm calls, which it counts.
    # The plain output layer: the chunked CPU loss runs the same matmuls but partly as in-place addmm_, which the
    # counter does not see.
    keep = batch["tgt_out"] != 0
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        loss = smoothed_nll(model(batch["src"], batch["tgt_in"], keep=keep), batch["tgt_out"][keep], 0.1)[0]
        loss.backward()
    counted = counter.get_total_flops()
    assert train_flops(cfg.model, V, batch) == pytest.approx(counted, rel=1e-9)


def test_padding_is_not_counted_as_model_work():
    cfg = ExperimentConfig().model
    full = {"src": torch.zeros(8, 20), "tgt_in": torch.zeros(8, 22), "src_tokens": 160, "tgt_tokens": 176}
    half = {**full, "src_tokens": 80, "tgt_tokens": 88}
    assert train_flops(cfg, 1000, half) < 0.6 * train_flops(cfg, 1000, full)


def test_peak_flops_from_override_or_unknown_on_cpu():
    assert peak_flops(torch.device("cpu"), "32") is None
    assert peak_flops(torch.device("cpu"), "bf16-mixed", 2.5) == 2.5e12


def test_speed_callback_reports_model_tflops_and_mfu():
    speed = SpeedCallback(every=1, flops=lambda batch: 4e12, peak_tflops=8.0)
    speed.peak = 8e12
    rates = speed._rates({"src": 10, "tgt": 20, "batches": 2, "seconds": 2.0, "flops": 8e12}, 1, torch.device("cpu"))
    assert rates["speed/model_tflops"] == pytest.approx(4.0)
    assert rates["speed/mfu"] == pytest.approx(0.5)
    no_flops = SpeedCallback(every=1)._rates({"src": 1, "tgt": 1, "batches": 1, "seconds": 1.0, "flops": 0.0}, 1,
                                             torch.device("cpu"))  # fmt: skip
    assert "speed/mfu" not in no_flops and "speed/model_tflops" not in no_flops


def test_peak_tflops_must_be_positive():
    with pytest.raises(ValueError, match="train.peak_tflops"):
        load_config([], ["train.peak_tflops=0"])
