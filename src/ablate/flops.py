"""Model FLOPs of a training step and the device peak they are measured against (model FLOPs utilisation, MFU).

Counted as PaLM (Chowdhury et al. 2022, App. B) does: 2 FLOPs per multiply-add of every matmul the model needs for
the real (non-pad) tokens, attention scores and weighted sums over the batch's padded lengths (what dense kernels
compute; the causal half too), backward twice the forward. Embedding lookups, norms, softmax and the optimizer are
left out, so MFU is a lower bound on how busy the matmul units were.
"""

from __future__ import annotations

import torch


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


def peak_flops(device: torch.device, precision: str, override_tflops: float | None = None) -> float | None:
    """The device's peak FLOP/s for this precision: `override_tflops` if given, else Lightning's table of known
    accelerators (dense figures where it has them); None on CPU or an unknown chip."""
    if override_tflops:
        return override_tflops * 1e12
    if device.type != "cuda":
        return None
    from lightning.fabric.utilities.throughput import get_available_flops

    if "bf16" in precision:
        dtype = torch.bfloat16
    elif "16" in precision:
        dtype = torch.float16
    else:
        dtype = "tfloat32" if torch.backends.cuda.matmul.allow_tf32 else torch.float32
    return get_available_flops(device, dtype)
