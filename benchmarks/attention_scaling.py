"""Attention time and memory against sequence length, for every registered attention variant.

Each row is one encoder self-attention sublayer (projections, kernel, output projection) built through the real
config path (`build_transformer` with `model.attention`, `model.attention_scaling`, `model.kv_heads`), timed for a
training step's forward + backward on one sequence of length L with the padding mask training passes. Peak memory is
the RSS growth over one step (Linux), measured in a fresh process whose glibc returns freed memory at once; time is
measured in another fresh process with the default allocator. A size whose time or memory, extrapolated from the previous size, would pass --max-seconds or
--max-gib is skipped and printed as such. Cost is also shown relative to the default (`scaled_dot_product`, 1/sqrt(d_k)).
Run: python benchmarks/attention_scaling.py [--lengths 128 256 ... 4096] [--out docs/attention-scaling]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from ablate.experiment import load_config
from ablate.model import ATTENTION, SCALING, build_transformer

sys.path.insert(0, str(Path(__file__).parent))
from common import environment, peak_rss, reset_peak_rss  # noqa: E402

DEFAULT = "scaled_dot_product"
# glibc: serve allocations of 64 KiB and more by mmap and give freed heap back at once, so RSS tracks live memory
MALLOC_RELEASE = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


def rows() -> dict[str, list[str]]:
    """Row name -> config overrides: every kernel at the paper's scaling, every scaling on the default kernel, MQA."""
    out = {name: [f"model.attention={name}"] for name in ATTENTION}
    for scaling in SCALING:
        if scaling != "inv_sqrt_dk":
            out[f"{DEFAULT} + {scaling}"] = [f"model.attention={DEFAULT}", f"model.attention_scaling={scaling}"]
    out[f"{DEFAULT} kv_heads=1"] = [f"model.attention={DEFAULT}", "model.kv_heads=1"]
    return out


def sublayer(overrides: list[str], args: argparse.Namespace) -> torch.nn.Module:
    base = [f"model.d_model={args.d_model}", f"model.heads={args.heads}", "model.enc_layers=1", "model.dec_layers=1",
            f"model.max_positions={max(args.lengths)}", "model.dropout=0.0"]  # fmt: skip
    cfg = load_config([], base + overrides)
    return build_transformer(cfg.model, 16).encoder[0].self_attn


def training_step(attn: torch.nn.Module, length: int, d_model: int):
    x = torch.randn(1, length, d_model, requires_grad=True)
    mask = torch.ones(1, 1, 1, length, dtype=torch.bool)  # the encoder's padding mask (nothing padded)

    def step() -> None:
        attn(x, mask=mask).sum().backward()
        x.grad = None
        attn.zero_grad(set_to_none=True)

    return step


def memory_row(overrides: list[str], args: argparse.Namespace) -> dict[int, float | str]:
    """{L: peak RSS growth (MiB) of one forward + backward, or why it was skipped}. Runs where glibc returns freed
    memory to the system at once (see `main`), so each step's growth shows in RSS however earlier steps went."""
    torch.set_num_threads(args.threads)
    attn, out, prev = sublayer(overrides, args), {}, None
    for length in sorted(args.lengths):
        if prev is not None:
            est = prev[1] / 1024 * (length / prev[0]) ** 2  # quadratic at worst
            if isinstance(out[prev[0]], str) or est > args.max_gib:
                out[length] = out[prev[0]] if isinstance(out[prev[0]], str) else f"est. {est:.1f} GiB"
                continue
        step = training_step(attn, length, args.d_model)
        rss = reset_peak_rss()
        step()
        out[length] = (peak_rss() - rss) / 2**20
        prev = (length, out[length])
    return out


def time_row(overrides: list[str], lengths: list[int], args: argparse.Namespace) -> dict[int, float | str]:
    """{L: median milliseconds of a forward + backward after one warm-up step, or why it was skipped}."""
    torch.set_num_threads(args.threads)
    attn, out, prev = sublayer(overrides, args), {}, None
    for length in lengths:
        if prev is not None:
            est = prev[1] / 1000 * (length / prev[0]) ** 2 * (args.repeats + 1)
            if isinstance(out[prev[0]], str) or est > args.max_seconds:
                out[length] = out[prev[0]] if isinstance(out[prev[0]], str) else f"est. {est:.0f} s"
                continue
        step = training_step(attn, length, args.d_model)
        step()
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        out[length] = 1000 * statistics.median(times)
        prev = (length, out[length])
    return out


def measure(name: str, overrides: list[str], args: argparse.Namespace) -> dict[int, dict]:
    """Memory first (fresh process, eager glibc release), then time (fresh process, default allocator) on the
    lengths that fit."""
    spawn = multiprocessing.get_context("spawn")
    saved = {k: os.environ.get(k) for k in MALLOC_RELEASE}
    os.environ.update(MALLOC_RELEASE)
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            memory = pool.submit(memory_row, overrides, args).result()
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    fits = [n for n, m in memory.items() if not isinstance(m, str)]
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        times = pool.submit(time_row, overrides, fits, args).result()
    out = {}
    for n, m in memory.items():
        t = times.get(n, m)
        out[n] = {"skipped": t} if isinstance(t, str) else {"ms": t, "mib": m}
    return out


def print_table(results: dict, lengths: list[int]) -> None:
    table = Table(title="self-attention sublayer, forward + backward of one sequence: ms | peak MiB (x default time)")
    table.add_column("variant")
    for length in lengths:
        table.add_column(f"L={length}", justify="right")
    for name, per_len in results.items():
        cells = []
        for length in lengths:
            r = per_len[length]
            if "skipped" in r:
                cells.append(f"skipped ({r['skipped']})")
                continue
            ref = results[DEFAULT][length]
            rel = f" (x{r['ms'] / ref['ms']:.1f})" if "ms" in ref and name != DEFAULT else ""
            cells.append(f"{r['ms']:,.1f} | {r['mib']:,.0f}{rel}")
        table.add_row(name, *cells)
    Console(width=60 + 26 * len(lengths)).print(table)


def plot(results: dict, lengths: list[int], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name, per_len in results.items():
        done = [length for length in lengths if "ms" in per_len[length]]
        style = "-" if name in ATTENTION else "--"
        ax_t.plot(done, [per_len[n]["ms"] for n in done], style, marker="o", label=name)
        ax_m.plot(done, [max(per_len[n]["mib"], 0.1) for n in done], style, marker="o", label=name)
    for ax, ylabel in ((ax_t, "forward + backward (ms)"), (ax_m, "peak memory growth (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048, 4096])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3, help="timed steps per length (median reported)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--max-seconds", type=float, default=60.0, help="skip a length whose estimated step takes longer")
    p.add_argument("--max-gib", type=float, default=8.0, help="skip a length whose estimated peak memory is larger")
    p.add_argument("--only", nargs="*", help="row names to run (default: all)")
    p.add_argument("--out", default="docs/attention-scaling", help="writes OUT.png, OUT.csv and OUT.json")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    todo = {name: o for name, o in rows().items() if not args.only or name in args.only}
    if not todo or (args.only and DEFAULT not in todo):
        todo = {DEFAULT: rows()[DEFAULT], **todo}  # the reference for relative cost
    results = {}
    for name, overrides in todo.items():
        results[name] = measure(name, overrides, args)
        done = [f"L={n}: {r['ms']:.1f} ms" for n, r in results[name].items() if "ms" in r]
        print(f"{name}: {', '.join(done)}", flush=True)
    lengths = sorted(args.lengths)
    print_table(results, lengths)
    env = environment(torch.device("cpu"))
    env["threads"] = args.threads
    title = (f"d_model {args.d_model}, {args.heads} heads, batch 1, fp32, {env['machine']}, {args.threads} threads, "
             f"torch {env['torch']}")  # fmt: skip
    print(title)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(results, lengths, out.with_suffix(".png"), title)
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "length", "ms", "peak_mib", "x_default_time", "skipped"])
        for name, per_len in results.items():
            for length in lengths:
                r, ref = per_len[length], results[DEFAULT][length]
                rel = r["ms"] / ref["ms"] if "ms" in r and "ms" in ref else math.nan
                writer.writerow([name, length, r.get("ms", ""), r.get("mib", ""), f"{rel:.3f}", r.get("skipped", "")])
    out.with_suffix(".json").write_text(json.dumps({"args": vars(args), "env": env, "results": results}, indent=2))
    print(f"wrote {out.with_suffix('.png')}, .csv, .json")


if __name__ == "__main__":
    main()
