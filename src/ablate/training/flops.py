"""Model FLOPs of a training step and the device peak they are measured against (model FLOPs utilisation, MFU).

Counted as PaLM (Chowdhury et al. 2022, App. B) does: 2 FLOPs per multiply-add of every matmul the model needs for
the real (non-pad) tokens, attention scores and weighted sums over the batch's padded lengths (what dense kernels
compute; the causal half too), backward twice the forward. Embedding lookups, norms, softmax and the optimizer are
left out, so MFU is a lower bound on how busy the matmul units were.

The peak is ablate's own table of DENSE (no 2:4 sparsity) tensor-core figures per card, keyed by the names
`torch.cuda.get_device_name` reports; Lightning's table misses names such as "NVIDIA H200" and lists some cards at
their sparse or CUDA-core rates, so it is only the fallback for cards not listed here.
"""

from __future__ import annotations

import logging
import re

import torch

from ablate.training.precision import Precision

log = logging.getLogger(__name__)


def train_flops(m, vocab_size: int, batch: dict) -> float:
    """Model FLOPs of forward + backward on `batch` (src (B, S), tgt_in (B, T), src_tokens, tgt_tokens)."""
    d, h = m.d_model, m.heads
    d_k, d_v = m.head_dims
    g = m.kv_heads or h
    q, kv, o = h * d_k, g * (d_k + d_v), h * d_v  # projection widths
    b, s = batch["src"].shape
    t = batch["tgt_in"].shape[1]
    n_src, n_tgt = int(batch["src_tokens"]), int(batch["tgt_tokens"])
    ffn = 2 * d * m.d_ff
    enc_per_token = d * (q + kv) + o * d + ffn
    dec_per_token = (d * (q + kv) + o * d) + (d * q + o * d) + ffn  # self-attention, cross attention (queries), FFN
    matmul = m.enc_layers * enc_per_token * n_src + m.dec_layers * (dec_per_token * n_tgt + d * kv * n_src)
    matmul += d * vocab_size * n_tgt  # output layer, real targets only
    attention = b * h * (d_k + d_v) * (m.enc_layers * s * s + m.dec_layers * (t * t + t * s))
    return 3 * 2 * (matmul + attention)


# Dense peak TFLOP/s of bf16/fp16 tensor cores with FP32 accumulate, TF32 tensor cores and FP32 CUDA cores. NVIDIA's
# datasheets print tensor figures with 2:4 sparsity (marked * below), twice the dense rate; those are halved here.
# Sources: the H100 / H200 datasheets and the Hopper whitepaper (H100 SXM5 989.4 / 494.7 / 66.9; H100 PCIe
# 756 / 378 / 51.2; H100 and H200 NVL 1,671* / 835* / 60 per GPU); H800 as H100 (it differs in NVLink and FP64);
# the HGX B200 datasheet (4.5* PFLOPS / 2.2* PFLOPS / 75 TFLOPS per GPU); the A100 datasheet (312 / 156 / 19.5,
# every A100 40/80 GB SXM4 and PCIe); the L40S and L4 datasheets (362.05 / 183 / 91.6; 242* / 120* / 30.3); the Ada
# whitepaper's appendix (RTX 4090 165.2 / 82.6 / 82.6, GeForce cards run FP32 accumulate at half rate; RTX 6000 Ada
# 364.2 / 182.1 / 91.1); the GA102 whitepaper (RTX 3090 71 / 35.6 / 35.6) and RTX A6000 datasheet (309.7* /
# 154.8* / 38.7). Volta and Turing have neither bf16 nor TF32 tensor cores: V100 SXM2 125 fp16 / 15.7 fp32, V100
# PCIe 112 / 14 (V100 datasheet), T4 65 / 8.1 (T4 datasheet). The A10G (AWS) has no NVIDIA datasheet: Lightning's
# table (A10 figures) or train.peak_tflops covers it.
PEAKS: dict[str, dict[str, float]] = {  # TFLOP/s
    "h100 sxm": {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9},
    "h100 pcie": {"bf16": 756, "fp16": 756, "tf32": 378, "fp32": 51.2},
    "h100 nvl": {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60},
    "b200": {"bf16": 2250, "fp16": 2250, "tf32": 1100, "fp32": 75},
    "a100": {"bf16": 312, "fp16": 312, "tf32": 156, "fp32": 19.5},
    "l40s": {"bf16": 362.05, "fp16": 362.05, "tf32": 183, "fp32": 91.6},
    "l4": {"bf16": 121, "fp16": 121, "tf32": 60, "fp32": 30.3},
    "rtx 4090": {"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp32": 82.6},
    "rtx 6000 ada": {"bf16": 364.2, "fp16": 364.2, "tf32": 182.1, "fp32": 91.1},
    "rtx 3090": {"bf16": 71, "fp16": 71, "tf32": 35.6, "fp32": 35.6},
    "rtx a6000": {"bf16": 154.8, "fp16": 154.8, "tf32": 77.4, "fp32": 38.7},
    "v100 sxm2": {"fp16": 125, "fp32": 15.7},
    "v100 pcie": {"fp16": 112, "fp32": 14},
    "t4": {"fp16": 65, "fp32": 8.1},
}

# torch.cuda.get_device_name -> PEAKS key, for the names these cards report.
DEVICE_NAMES = {
    "NVIDIA H200": "h100 sxm",  # H200 SXM: H100 SXM's compute, more and faster memory
    "NVIDIA H200 NVL": "h100 nvl",
    "NVIDIA H100 80GB HBM3": "h100 sxm",
    "NVIDIA H100 PCIe": "h100 pcie",
    "NVIDIA H100 NVL": "h100 nvl",
    "NVIDIA H800": "h100 sxm",
    "NVIDIA H800 PCIe": "h100 pcie",
    "NVIDIA B200": "b200",
    "NVIDIA A100-SXM4-80GB": "a100",
    "NVIDIA A100-SXM4-40GB": "a100",
    "NVIDIA A100-PCIE-40GB": "a100",
    "NVIDIA A100 80GB PCIe": "a100",
    "NVIDIA L40S": "l40s",
    "NVIDIA L4": "l4",
    "NVIDIA GeForce RTX 4090": "rtx 4090",
    "NVIDIA GeForce RTX 3090": "rtx 3090",
    "NVIDIA RTX A6000": "rtx a6000",
    "NVIDIA RTX 6000 Ada Generation": "rtx 6000 ada",
    "Tesla V100-SXM2-16GB": "v100 sxm2",
    "Tesla V100-SXM2-32GB": "v100 sxm2",
    "Tesla V100-PCIE-16GB": "v100 pcie",
    "Tesla V100-PCIE-32GB": "v100 pcie",
    "Tesla T4": "t4",
}

# Other spellings of the same cards (driver or cloud variants): (tokens the name must have, tokens it must not have,
# PEAKS key), first match wins. Whole tokens, so "L4" never matches "L40", nor "RTX 4090" the laptop or "D" parts.
_RULES: list[tuple[set[str], set[str], str]] = [
    ({"h200", "nvl"}, set(), "h100 nvl"),
    ({"h200"}, set(), "h100 sxm"),
    ({"h100", "nvl"}, set(), "h100 nvl"),
    ({"h100", "pcie"}, set(), "h100 pcie"),
    ({"h100", "hbm2e"}, set(), "h100 pcie"),
    ({"h100"}, set(), "h100 sxm"),
    ({"h800", "pcie"}, set(), "h100 pcie"),
    ({"h800"}, set(), "h100 sxm"),
    ({"b200"}, set(), "b200"),
    ({"a100"}, set(), "a100"),
    ({"l40s"}, set(), "l40s"),
    ({"l4"}, set(), "l4"),
    ({"rtx", "4090"}, {"d", "laptop", "mobile"}, "rtx 4090"),
    ({"rtx", "3090"}, {"ti", "laptop", "mobile"}, "rtx 3090"),
    ({"rtx", "a6000"}, set(), "rtx a6000"),
    ({"rtx", "6000", "ada"}, set(), "rtx 6000 ada"),
    ({"v100", "sxm2"}, set(), "v100 sxm2"),
    ({"v100", "pcie"}, set(), "v100 pcie"),
    ({"t4"}, set(), "t4"),
]
_warned: set[str] = set()


def card(name: str) -> str | None:
    """The PEAKS key of a CUDA device name: the exact name first, then its tokens against _RULES. A MIG slice
    ("... MIG 1g.10gb") has a fraction of the card's units, so it matches nothing."""
    if name in DEVICE_NAMES:
        return DEVICE_NAMES[name]
    tokens = set(re.split(r"[\s\-_/()]+", name.lower())) - {"", "nvidia", "tesla", "geforce"}
    if "mig" in tokens:
        return None
    return next((key for needs, avoid, key in _RULES if needs <= tokens and not avoid & tokens), None)


def _warn_once(name: str, message: str) -> None:
    if name not in _warned:
        _warned.add(name)
        log.warning("%s; set train.peak_tflops (TFLOP/s) for speed/mfu", message)


def peak_flops(device: torch.device, precision: Precision, override_tflops: float | None = None) -> float | None:
    """The device's dense peak FLOP/s in the run's arithmetic (`precision.arithmetic()`):
    `override_tflops` (train.peak_tflops) if given, else ablate's table (PEAKS), else Lightning's; None on CPU and
    on a card or precision neither table knows (logged once per card)."""
    if override_tflops:
        return override_tflops * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    kind = precision.arithmetic()
    key = card(name)
    if key is not None:
        peaks = PEAKS[key]
        tflops = peaks.get(kind) or (peaks.get("fp32") if kind == "tf32" else None)  # no TF32 units: FP32 runs as FP32
        if tflops is None:
            _warn_once(name, f"no {kind} peak for {name!r} (ablate.training.flops.PEAKS[{key!r}] has {sorted(peaks)})")
        return None if tflops is None else tflops * 1e12
    from lightning.fabric.utilities.throughput import get_available_flops

    if " mig " in f" {name.lower()} ":
        _warn_once(name, f"CUDA device {name!r} is a MIG slice, with a share of the card's peak FLOP/s")
        return None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": "tfloat32", "fp32": torch.float32, "fp64": torch.float64}[kind]
    peak = get_available_flops(device, dtype)
    if not peak:
        _warn_once(name, f"the peak FLOP/s of CUDA device {name!r} is in neither ablate.training.flops.PEAKS nor Lightning's table")
        return None
    return float(peak)
