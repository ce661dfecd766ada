"""The arms of benchmarks/train_throughput.py: ablate's model and its same-sized baselines built with one set of
weights, the batches they train on, one training step of each (ablate's loss, or the baselines' usual
F.cross_entropy) and the timed passes over those batches, rotated round by round."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ablate.data.batching import make_loader
from ablate.data.module import TranslationDataModule
from ablate.model import build_transformer
from ablate.model.loss import translation_loss
from ablate.model.tokens import PAD_ID

sys.path.insert(0, str(Path(__file__).parent))
from baselines import MarianBaseline, TorchTransformer  # noqa: E402

OURS = "ablate"


def load_batches(cfg, n: int) -> tuple[list[dict], int, int]:
    """The first n batches of a shuffled epoch (a mix of all lengths), the vocab size and the epoch's target tokens."""
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    train = dm.encoded("train")
    loader = make_loader(train, cfg.data.max_tokens, shuffle=True, seed=cfg.seed)
    tensors = ("src", "tgt_in", "tgt_out", "keep_index", "target")  # the last two where the collate provides them
    batches = [
        {**{k: b[k] for k in tensors if k in b}, "src_tokens": int(b["src_tokens"]), "tgt_tokens": int(b["tgt_tokens"])}
        for b in itertools.islice(loader, n)
    ]
    if len(batches) < n:
        raise ValueError(f"asked for {n} batches but the training split has only {len(batches)}")
    return batches, dm.tokenizer.vocab_size, int(train.tgt_lens.sum())


def build_models(cfg, vocab_size: int, names: list[str]) -> dict[str, nn.Module]:
    """ablate's model and the named baselines, all holding ablate's initial weights."""
    torch.manual_seed(cfg.seed)
    ours = build_transformer(cfg.model, vocab_size)
    models = {OURS: ours}
    for name in names:
        models[name] = BASELINES[name](cfg.model, vocab_size)
        models[name].copy_from(ours)
    return models


def train_step(name: str, model: nn.Module, opt: torch.optim.Optimizer, batch: dict, label_smoothing: float) -> None:
    if name == OURS:  # what `ablate train` runs: the output layer and softmax see real targets only
        loss = translation_loss(model, batch, label_smoothing)[0]
    else:  # the usual way to train a baseline
        logits = model(batch["src"], batch["tgt_in"]).flatten(0, 1)  # (B*T, V)
        target = batch["tgt_out"].flatten()  # (B*T,)
        loss = F.cross_entropy(logits, target, ignore_index=PAD_ID, label_smoothing=label_smoothing, reduction="sum")
    (loss / batch["tgt_tokens"]).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def make_optimizer(model: nn.Module, cfg, lr: float, fused: bool = False) -> torch.optim.Optimizer:
    """Adam over the trainable weights; `fused` (CUDA only, see main) = one kernel for the whole update."""
    trainable = [p for p in model.parameters() if p.requires_grad]  # Marian's position tables are frozen
    return torch.optim.Adam(trainable, lr=lr, betas=tuple(cfg.train.betas), eps=cfg.train.eps, fused=fused or None)


def prepare(model: nn.Module, device: torch.device, compile: bool) -> nn.Module:
    """The model on `device`, compiled in place with --compile (as `train.compile` does to ablate's model)."""
    model = model.to(device)
    if compile:
        model.compile()
    return model


PRECISION = "fp32"  # or "bf16": autocast, as Lightning's bf16-mixed (set from --precision)


def timed_pass(name, model, opt, batches: list[dict], label_smoothing: float, device: torch.device) -> float:
    """Seconds for one training step on each batch (CUDA work finished on both ends)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for batch in batches:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=PRECISION == "bf16"):
            train_step(name, model, opt, batch, label_smoothing)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def measure(models: dict, opts: dict, batches: list[dict], rounds: int, smoothing: float, device) -> dict:
    """Seconds per pass over `batches`, per model and round; the order of models rotates between rounds."""
    seconds = {name: [] for name in models}
    tgt_tokens = sum(b["tgt_tokens"] for b in batches)
    names = list(models)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            seconds[name].append(timed_pass(name, models[name], opts[name], batches, smoothing, device))
        speeds = "  ".join(f"{name} {tgt_tokens / s[-1]:,.0f}" for name, s in seconds.items())
        print(f"round {r + 1}/{rounds} (tgt tok/s): {speeds}", flush=True)
    return seconds


BASELINES = {"nn.Transformer": TorchTransformer, "MarianMT": MarianBaseline}
