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
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/train_throughput.py [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from ablate.experiment import load_config
from ablate.model import count_parameters
from ablate.training.flops import peak_flops, train_flops
from ablate.training.precision import Precision

sys.path.insert(0, str(Path(__file__).parent))
import train_arms  # noqa: E402
from baselines import check_same_function  # noqa: E402
from common import environment, one_per_shape, paired_ratio, to_device  # noqa: E402
from train_arms import BASELINES, OURS, build_models, load_batches, make_optimizer, measure, prepare, timed_pass  # noqa: E402
from train_memory import memory_child, peak_memory  # noqa: E402


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


def main() -> None:
    args = parse_args()
    train_arms.PRECISION = args.precision  # read by every timed pass
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
    peak = peak_flops(device, Precision("bf16-mixed", "high") if args.precision == "bf16" else Precision("32", "highest"), args.peak_tflops)
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
