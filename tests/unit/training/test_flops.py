"""The analytic FLOPs behind speed/mfu must agree with torch's own count of the matmuls the model runs, and the
device peak they are divided by must be found for every common GPU name (no GPU needed: names are mocked)."""

import json
import logging

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from ablate.config import ExperimentConfig, TrainConfig
from ablate.experiment import load_config
from ablate.model import build_transformer
from ablate.model.loss import smoothed_nll
from ablate.training import flops
from ablate.training.flops import DEVICE_NAMES, PEAKS, card, peak_flops, train_flops
from ablate.training.metrics import SpeedCallback
from ablate.training.precision import Precision

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
    assert peak_flops(torch.device("cpu"), Precision("32", "highest")) is None
    assert peak_flops(torch.device("cpu"), of("bf16-mixed"), 2.5) == 2.5e12


CUDA = torch.device("cuda", 0)  # a device object only: nothing runs on it


def of(precision: str, matmul: str | None = None) -> Precision:
    return Precision.of(TrainConfig(precision=precision, matmul_precision=matmul))


@pytest.fixture
def gpu(monkeypatch):
    """Make torch report a CUDA device of the given name; TF32 off, and each test's unknown names warn afresh."""

    def named(name: str) -> None:
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)

    matmul = torch.backends.cuda.matmul  # not monkeypatch: the flag is a property it cannot restore
    tf32 = matmul.allow_tf32
    matmul.allow_tf32 = False
    monkeypatch.setattr(flops, "_warned", set())
    yield named
    matmul.allow_tf32 = tf32


@pytest.mark.parametrize(("name", "precision", "tflops"), [
    ("NVIDIA H200", "bf16-mixed", 989.4),  # the name Lightning's table missed (issue 30)
    ("NVIDIA H100 80GB HBM3", "16-mixed", 989.4),
    ("NVIDIA H100 PCIe", "bf16-mixed", 756),
    ("NVIDIA H100 NVL", "bf16-mixed", 835.5),
    ("NVIDIA A100-SXM4-40GB", "bf16-mixed", 312),
    ("NVIDIA A100 80GB PCIe", "32", 19.5),
    ("NVIDIA GeForce RTX 4090", "bf16-mixed", 165.2),  # FP32 accumulate: half the FP16-accumulate rate
    ("NVIDIA L4", "bf16-mixed", 121),
    ("Tesla T4", "16-mixed", 65),
])  # fmt: skip
def test_peak_flops_of_known_cards_are_their_dense_figures(gpu, name, precision, tflops):
    gpu(name)
    assert peak_flops(CUDA, of(precision)) == pytest.approx(tflops * 1e12)


def test_fp32_peak_is_the_tf32_tensor_rate_only_when_the_run_allows_tf32(gpu):
    gpu("NVIDIA H100 PCIe")
    assert peak_flops(CUDA, of("32")) == pytest.approx(51.2e12)
    assert peak_flops(CUDA, of("32", "high")) == pytest.approx(378e12)  # train.matmul_precision=high: TF32
    gpu("Tesla V100-SXM2-32GB")  # no TF32 units: fp32 matmuls run at the FP32 rate either way
    assert peak_flops(CUDA, of("32", "high")) == pytest.approx(15.7e12)


@pytest.mark.parametrize(("name", "key"), [
    ("NVIDIA H100 SXM5 80GB", "h100 sxm"),
    ("NVIDIA H100 80GB HBM2e", "h100 pcie"),
    ("NVIDIA H200 NVL", "h100 nvl"),
    ("NVIDIA H200 141GB HBM3e", "h100 sxm"),
    ("NVIDIA A100-SXM-80GB", "a100"),
    ("NVIDIA L40", None),  # not the L4 nor the L40S: left to Lightning
    ("NVIDIA GeForce RTX 4090 Laptop GPU", None),
    ("NVIDIA GeForce RTX 4090 D", None),
    ("NVIDIA GeForce RTX 3090 Ti", None),
    ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", None),  # a slice of the card has a slice of its peak
])  # fmt: skip
def test_other_spellings_resolve_to_the_same_card_and_look_alikes_do_not(name, key):
    assert card(name) == key


def test_every_listed_name_resolves_by_its_tokens_too():
    for name, key in DEVICE_NAMES.items():
        assert key in PEAKS, name
        assert card(name.upper()) == key, name  # not the exact name: the token rules must agree with the list


def test_a_card_ablate_does_not_list_falls_back_to_lightning(gpu, monkeypatch):
    import lightning.fabric.utilities.throughput as throughput

    asked = []
    monkeypatch.setattr(throughput, "get_available_flops", lambda device, dtype: asked.append(dtype) or 149.7e12)
    gpu("NVIDIA A40")
    assert peak_flops(CUDA, of("bf16-mixed")) == 149.7e12
    peak_flops(CUDA, of("32", "high"))
    assert asked == [torch.bfloat16, "tfloat32"]


@pytest.mark.filterwarnings("ignore:FLOPs not found")  # Lightning's own warning, from the fallback
def test_an_unknown_card_has_no_peak_and_says_once_how_to_set_it(gpu, caplog):
    gpu("NVIDIA Imaginary X1")
    with caplog.at_level(logging.WARNING, logger="ablate.training.flops"):
        assert peak_flops(CUDA, of("bf16-mixed")) is None
        assert peak_flops(CUDA, of("bf16-mixed")) is None
    (record,) = [r for r in caplog.records if r.name == "ablate.training.flops"]
    assert "NVIDIA Imaginary X1" in record.getMessage() and "train.peak_tflops" in record.getMessage()


def test_a_card_without_the_precision_has_no_peak(gpu):
    gpu("Tesla V100-SXM2-16GB")  # Volta has no bf16 tensor cores
    assert peak_flops(CUDA, of("bf16-mixed")) is None
    assert peak_flops(CUDA, of("16-mixed")) == pytest.approx(125e12)


def test_a_mig_slice_has_no_peak_rather_than_the_whole_cards(gpu):
    gpu("NVIDIA A100-SXM4-40GB MIG 3g.20gb")  # Lightning's table would match "a100" and give the whole card's peak
    assert peak_flops(CUDA, of("bf16-mixed")) is None


def test_the_override_wins_over_every_table(gpu):
    gpu("NVIDIA H200")
    assert peak_flops(CUDA, of("bf16-mixed"), 500.0) == 500e12
    gpu("NVIDIA Imaginary X1")
    assert peak_flops(CUDA, of("32"), 1.5) == 1.5e12


def test_a_run_on_a_known_gpu_writes_mfu_to_its_summary(tmp_path, gpu, monkeypatch):
    """The path of issue 30: SpeedCallback asks peak_flops for the run's device; here a CPU run is told it is an H200."""
    from helpers import tiny_experiment

    import ablate.training.metrics
    from ablate.run.summary_fields import check_summary
    from ablate.run.train import train

    gpu("NVIDIA H200")
    asked = []

    def as_if_h200(device, precision, override):
        asked.append((device.type, precision, override))
        return peak_flops(CUDA, precision, override)

    monkeypatch.setattr(ablate.training.metrics, "peak_flops", as_if_h200)
    cfg = tiny_experiment(tmp_path, train={"max_steps": 4, "val_every_steps": 4, "log_every_steps": 2, "keep_last": 1})
    summary = json.loads(json.dumps(train(cfg)))
    assert asked == [("cpu", of("32"), None)]  # the run's Precision, made from its config: fp32 matmuls
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    check_summary(written, "the run's summary.json")  # what a run writes is what readers check it against
    assert written["speed/mfu"] == summary["speed/mfu"] > 0
    assert written["speed/mfu"] == pytest.approx(written["speed/model_tflops"] * 1e12 / 66.9e12, rel=1e-3)  # fp32, TF32 off
    logged = (tmp_path / "run").rglob("metrics*.csv")
    assert any("speed/mfu" in path.read_text().splitlines()[0] for path in logged)


def test_speed_callback_reports_model_tflops_and_mfu():
    speed = SpeedCallback(every=1, flops=lambda batch: 4e12, peak_tflops=8.0)
    speed.peak = 8e12
    rates = speed._rates({"src": 10, "tgt": 20, "batches": 2, "seconds": 2.0, "flops": 8e12}, 1)
    assert rates["speed/model_tflops"] == pytest.approx(4.0)
    assert rates["speed/mfu"] == pytest.approx(0.5)
    no_flops = SpeedCallback(every=1)._rates({"src": 1, "tgt": 1, "batches": 1, "seconds": 1.0, "flops": 0.0}, 1)
    assert "speed/mfu" not in no_flops and "speed/model_tflops" not in no_flops


def test_peak_tflops_must_be_positive():
    with pytest.raises(ValueError, match="train.peak_tflops"):
        load_config([], ["train.peak_tflops=0"])
