"""Peak memory of one arm of benchmarks/train_throughput.py: what a training pass adds on top of model and batches,
in a fresh child process on CPU (its RSS high-water mark), as torch's peak allocation on CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

from ablate.experiment import load_config

sys.path.insert(0, str(Path(__file__).parent))
from common import peak_rss, reset_peak_rss, to_device  # noqa: E402
from train_arms import OURS, build_models, make_optimizer, prepare, timed_pass  # noqa: E402

SCRIPT = Path(__file__).with_name("train_throughput.py")  # whose --memory-child runs memory_child below


def peak_memory(name: str, cfg, vocab_size: int, batches: list[dict], args, device: torch.device) -> float:
    """Peak memory (MiB) that training `name` adds on top of its model and batches: in a fresh process on CPU
    (freed heap an earlier model left would hide growth), as torch's peak allocation on CUDA."""
    if device.type == "cuda":
        model = prepare(build_models(cfg, vocab_size, [] if name == OURS else [name])[name], device, args.compile)
        opt = make_optimizer(model, cfg, args.lr, args.fused)
        return device_peak_memory(name, model, opt, batches, cfg.train.label_smoothing)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "batches.pt"
        torch.save({"batches": batches, "vocab_size": vocab_size}, path)
        cmd = [sys.executable, str(SCRIPT), "--memory-child", name, str(path), "--config", *args.config,
               "--set", *args.set, "--threads", str(args.threads), "--lr", str(args.lr), "--precision", args.precision,
               *(["--compile"] if args.compile else [])]  # fmt: skip
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_mib"]


def device_peak_memory(name: str, model: nn.Module, opt, batches: list[dict], smoothing: float) -> float:
    """torch's peak allocation (MiB) over one pass, above model, optimizer state and the batches, which are first
    moved to where the model is (they arrive on the host)."""
    device = next(model.parameters()).device
    batches = [to_device(b, device) for b in batches]
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    timed_pass(name, model, opt, batches, smoothing, device)
    return (torch.cuda.max_memory_allocated(device) - base) / 2**20


def memory_child(args) -> None:
    """Build one model, then report how far a training pass over the saved batches raises this process's RSS."""
    name, path = args.memory_child
    cfg = load_config(args.config, args.set)
    saved = torch.load(path, weights_only=True)
    model = prepare(build_models(cfg, saved["vocab_size"], [] if name == OURS else [name])[name], torch.device("cpu"), args.compile)
    opt = make_optimizer(model, cfg, args.lr)
    base = reset_peak_rss()
    timed_pass(name, model, opt, saved["batches"], cfg.train.label_smoothing, torch.device("cpu"))
    print(json.dumps({"peak_mib": (peak_rss() - base) / 2**20}))
