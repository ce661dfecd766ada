"""Training throughput and peak memory of ablate's Transformer against same-sized baselines on real Multi30k batches.

Baselines (benchmarks/baselines.py): torch.nn.Transformer, and Hugging Face MarianMTModel built from a MarianConfig
when `transformers` is installed (`pip install -e '.[bench]'`). All models train in one process on one list of
token-bucketed batches, starting from the same weights (checked: equal logits), with the same optimizer (Adam
0.9/0.98/1e-9, constant lr; --fused: fused kernels on CUDA), precision (fp32, or bf16 autocast with --precision bf16)
and compile setting (--compile: torch.compile each model). ablate trains exactly as `ablate train` does (ablate.model.loss);
the baselines use `F.cross_entropy` with the same label smoothing. Before the first round each model trains once on
every batch shape the rounds use (on CUDA or with --compile, where kernels are tuned or compiled per shape). Models
take turns round by round, so machine noise hits all alike; we report medians over rounds, and ratios paired within a
round. Peak memory is measured per model in a fresh child process (CPU) or as torch's peak allocation (CUDA).
Run: ABLATE_DATA_DIR=/work/shared/data python benchmarks/train_throughput.py [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table
from torch import nn

from ablate.data.batching import make_loader
from ablate.data.module import TranslationDataModule
from ablate.experiment import load_config
from ablate.model import build_transformer, count_parameters
from ablate.model.loss import translation_loss
from ablate.model.tokens import PAD_ID
from ablate.training.flops import peak_flops, train_flops

sys.path.insert(0, str(Path(__file__).parent))
from baselines import MarianBaseline, TorchTransformer, check_same_function  # noqa: E402
from common import environment, one_per_shape, paired_ratio, peak_rss, reset_peak_rss, to_device  # noqa: E402

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
        cmd = [sys.executable, __file__, "--memory-child", name, str(path), "--config", *args.config,
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


def print_table(results: dict, title: str) -> None:
    table = Table(title=title)
    for col in ("model", "params", "tgt tok/s", "src tok/s", "ms/step", "epoch s", "peak MiB", "TFLOP/s", "MFU", "vs ablate"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for name, r in results.items():
        table.add_row(name, f"{r['params']:,}", f"{r['tgt_tokens_per_s']:,.0f}", f"{r['src_tokens_per_s']:,.0f}",
                      f"{r['step_ms']:.1f}", f"{r['epoch_s']:,.0f}", f"{r['peak_mib']:,.0f}", f"{r['model_tflops']:.3f}",
                      "-" if r["mfu"] is None else f"{r['mfu']:.1%}", f"{r['time_ratio']:.2f}x")  # fmt: skip
    Console(width=140).print(table)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", nargs="+", default=["experiments/multi30k-small.yaml"], help="experiment YAML file(s)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides, e.g. model.d_ff=2048")
    p.add_argument("--baselines", nargs="*", default=None, help=f"subset of {sorted(BASELINES)} (default: all available)")
    p.add_argument("--steps", type=int, default=30, help="timed batches per model per round")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps per model before the first round")
    p.add_argument("--rounds", type=int, default=5, help="measurement rounds; the order of models rotates")
    p.add_argument("--memory-steps", type=int, default=5, help="batches per model in the peak-memory pass; 0 = skip")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--lr", type=float, default=1e-4, help="constant Adam learning rate")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16 = autocast (Lightning's bf16-mixed)")
    p.add_argument("--compile", action="store_true", help="torch.compile every model (run with and without: compare the faster)")
    p.add_argument("--fused", action="store_true", help="fused Adam for every model (CUDA; ignored on CPU)")
    p.add_argument("--peak-tflops", type=float, help="device peak for MFU (default: ablate.training.flops' table of GPUs)")
    p.add_argument("--json", metavar="OUT", help="also write the results to this JSON file")
    p.add_argument("--memory-child", nargs=2, metavar=("MODEL", "BATCHES"), help=argparse.SUPPRESS)
    return p.parse_args()


def available_baselines(asked: list[str] | None) -> list[str]:
    have = list(BASELINES)
    if importlib.util.find_spec("transformers") is None:
        have.remove("MarianMT")
        print("transformers is not installed (pip install -e '.[bench]'): skipping the MarianMT baseline")
    unknown = sorted(set(asked or []) - set(BASELINES))
    if unknown:
        raise SystemExit(f"unknown baseline(s) {unknown}; choose from {sorted(BASELINES)}")
    return [n for n in have if asked is None or n in asked]


BASELINES = {"nn.Transformer": TorchTransformer, "MarianMT": MarianBaseline}


def main() -> None:
    global PRECISION
    args = parse_args()
    PRECISION = args.precision
    torch.set_num_threads(args.threads)
    if args.memory_child:
        return memory_child(args)
    device = torch.device(args.device)
    cfg = load_config(args.config, args.set)
    m, t = cfg.model, cfg.train
    names = available_baselines(args.baselines)
    if args.fused and device.type != "cuda":
        print(f"--fused is ignored on {device.type}: every model keeps torch's default Adam there")
        args.fused = False
    cpu_batches, vocab_size, epoch_tgt_tokens = load_batches(cfg, args.warmup + args.steps)
    batches = [to_device(b, device) for b in cpu_batches]
    warmup, timed = batches[: args.warmup], batches[args.warmup :]
    if device.type != "cpu" or args.compile:  # kernels tuned or compiled per shape: meet every shape before timing
        warmup = warmup + one_per_shape(timed)
    src_tokens, tgt_tokens = sum(b["src_tokens"] for b in timed), sum(b["tgt_tokens"] for b in timed)
    padded = sum(b["src"].numel() + b["tgt_out"].numel() for b in timed)
    sentences = sum(b["src"].size(0) for b in timed)

    models = {name: model.to(device) for name, model in build_models(cfg, vocab_size, names).items()}
    for name in names:
        check_same_function(models[OURS], models[name], name, batches[0]["src"], batches[0]["tgt_in"])
    params = {name: sum(p.numel() for p in model.parameters() if p.requires_grad) for name, model in models.items()}
    assert params[OURS] == count_parameters(models[OURS])["total"]
    models = {name: prepare(model, device, args.compile) for name, model in models.items()}
    opts = {name: make_optimizer(model, cfg, args.lr, args.fused) for name, model in models.items()}
    shapes = len(warmup) - args.warmup
    print(f"every model: Adam (fused: {'yes' if args.fused else 'no'}), compile: {'yes' if args.compile else 'no'}, "
          f"{args.precision}; warm-up: {len(warmup)} steps each"
          + (f" ({args.warmup} + {shapes}, one per batch shape of the rounds)" if shapes else ""), flush=True)  # fmt: skip
    for name, model in models.items():
        timed_pass(name, model, opts[name], warmup, t.label_smoothing, device)
    seconds = measure(models, opts, timed, args.rounds, t.label_smoothing, device)
    del models, opts

    flops = sum(train_flops(m, vocab_size, b) for b in timed)  # model FLOPs of one pass (ablate.training.flops)
    peak = peak_flops(device, "bf16-mixed" if args.precision == "bf16" else "32", args.peak_tflops)
    results = {}
    for name, secs in seconds.items():
        tok_s = statistics.median(tgt_tokens / s for s in secs)
        results[name] = {
            "params": params[name],
            "tgt_tokens_per_s": tok_s,
            "src_tokens_per_s": statistics.median(src_tokens / s for s in secs),
            "step_ms": statistics.median(1000 * s / args.steps for s in secs),
            "epoch_s": epoch_tgt_tokens / tok_s,
            "time_ratio": statistics.median(s / o for s, o in zip(secs, seconds[OURS])),
            "model_tflops": flops / statistics.median(secs) / 1e12,
            "mfu": flops / statistics.median(secs) / peak if peak else None,
            "round_seconds": secs,
            "peak_mib": float("nan"),
        }
    if args.memory_steps:
        for name in results:
            mem_batches = cpu_batches[args.warmup : args.warmup + args.memory_steps]
            results[name]["peak_mib"] = peak_memory(name, cfg, vocab_size, mem_batches, args, device)
    ratio, ratios = paired_ratio(seconds, OURS, names)
    env = environment(device)

    print_table(results, f"training, {args.steps} Multi30k batches x {args.rounds} rounds (medians)")
    real = src_tokens + tgt_tokens
    print(f"model: {m.enc_layers}+{m.dec_layers} layers, d_model {m.d_model}, d_ff {m.d_ff}, heads {m.heads}, "
          f"dropout {m.dropout}, vocab {vocab_size}, {args.precision}")  # fmt: skip
    print(f"batches (mean): {sentences / args.steps:.0f} sentences, {real / args.steps:.0f} real tokens, "
          f"{1 - real / padded:.1%} padding, max_tokens {cfg.data.max_tokens}; epoch = {epoch_tgt_tokens:,} target "
          "tokens (epoch s = that / tgt tok/s)")  # fmt: skip
    print(
        f"torch {env['torch']}, {env['machine']}, {env['threads']} threads; peak MiB = memory a training pass "
        f"adds on top of model and batches ({'torch peak allocated' if device.type == 'cuda' else 'RSS, fresh process'})"
    )
    best = min(names, key=lambda n: results[n]["step_ms"])
    print(f"per-round ratios (fastest baseline time / ablate time): {', '.join(f'{x:.3f}' for x in ratios)}")
    for name in names:
        print(f"training throughput ratio vs {name}: {results[name]['time_ratio']:.2f}")
        print(f"peak memory ratio vs {name}: {results[OURS]['peak_mib'] / results[name]['peak_mib']:.2f}")
    print(f"training throughput ratio vs best baseline ({best}): {ratio:.2f}")
    if args.json:
        batch_info = {"count": args.steps, "sentences": sentences, "src_tokens": src_tokens, "tgt_tokens": tgt_tokens}
        out = {"args": vars(args), "env": env, "batches": batch_info, "results": results, "ratio_vs_best": ratio,
               "round_ratios": ratios}  # fmt: skip
        Path(args.json).write_text(json.dumps(out, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
