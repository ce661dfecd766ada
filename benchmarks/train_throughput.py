"""Training throughput of ablate's Transformer against a same-sized torch.nn.Transformer on real Multi30k batches.

Both models train in one process on one list of token-bucketed batches, with the same weights at the start, loss
(label-smoothed cross entropy, pad ignored), optimizer (Adam 0.9/0.98/1e-9, constant lr) and precision (fp32). The
models take turns round by round, so machine noise hits both alike; we report medians over rounds.
Run: ABLATE_DATA_DIR=/work/shared/data/multi30k python benchmarks/train_throughput.py [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import resource
import statistics
import time
import warnings
from datetime import datetime, timezone

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table
from torch import Tensor, nn

from ablate.batching import make_loader
from ablate.config import load_config
from ablate.data import TranslationDataModule
from ablate.model import build_transformer, count_parameters
from ablate.model.positional import sinusoids
from ablate.model.transformer import PAD_ID


class TorchTransformer(nn.Module):
    """nn.Transformer plus what it lacks: shared token embeddings (x sqrt(D)) tied to the output layer, sinusoids.

    nn.Transformer does three things that ablate's post-norm model (like the paper) does not; we align them so both
    time the same computation: dropout inside the FFN (removed), dropout on attention weights (set to
    model.attention_dropout, 0 by default) and a final LayerNorm after encoder and decoder (removed). Parameter
    counts then match exactly, and `copy_from` makes it compute the very function of an ablate model.
    """

    def __init__(self, cfg, vocab_size: int):
        super().__init__()
        d = cfg.d_model
        self.tokens = nn.Embedding(vocab_size, d, padding_idx=PAD_ID)
        self.register_buffer("pe", sinusoids(cfg.max_positions, d), persistent=False)
        self.scale, self.dropout = math.sqrt(d), nn.Dropout(cfg.dropout)
        self.core = nn.Transformer(
            d_model=d, nhead=cfg.heads, num_encoder_layers=cfg.enc_layers, num_decoder_layers=cfg.dec_layers,
            dim_feedforward=cfg.d_ff, dropout=cfg.dropout, activation=cfg.activation, batch_first=True,
            norm_first=False,
        )  # fmt: skip
        for layer in itertools.chain(self.core.encoder.layers, self.core.decoder.layers):
            layer.dropout = nn.Identity()  # the one between the two FFN linears
        for module in self.core.modules():
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = cfg.attention_dropout
        self.core.encoder.norm = self.core.decoder.norm = None
        self.output = nn.Linear(d, vocab_size, bias=False)
        self.output.weight = self.tokens.weight

    @torch.no_grad()
    def copy_from(self, model) -> None:
        """Take the weights of an ablate Transformer (post-norm, all embeddings tied)."""
        pairs = [(self.tokens, model.src_embed.tokens)]
        for mine, theirs in zip(self.core.encoder.layers, model.encoder):
            pairs += [(mine.self_attn, theirs.self_attn), (mine.norm1, theirs.res_attn.norm)]
            ff = theirs.ff.net
            pairs += [(mine.linear1, ff[0]), (mine.linear2, ff[2]), (mine.norm2, theirs.res_ff.norm)]
        for mine, theirs in zip(self.core.decoder.layers, model.decoder):
            pairs += [(mine.self_attn, theirs.self_attn), (mine.multihead_attn, theirs.cross_attn)]
            pairs += [(mine.norm1, theirs.res_self.norm), (mine.norm2, theirs.res_cross.norm)]
            ff = theirs.ff.net
            pairs += [(mine.linear1, ff[0]), (mine.linear2, ff[2]), (mine.norm3, theirs.res_ff.norm)]
        for dst, src in pairs:
            if isinstance(dst, nn.MultiheadAttention):  # both fuse W_q, W_k, W_v in that order
                dst.in_proj_weight.copy_(src.in_proj.weight)
                dst.in_proj_bias.copy_(src.in_proj.bias)
                dst.out_proj.load_state_dict(src.out_proj.state_dict())
            else:
                dst.load_state_dict(src.state_dict())

    def embed(self, ids: Tensor) -> Tensor:
        return self.dropout(self.tokens(ids) * self.scale + self.pe[: ids.size(1)])  # (B, L, D)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        t = tgt_in.size(1)
        src_pad, tgt_pad = src == PAD_ID, tgt_in == PAD_ID  # (B, S), (B, T); True = ignore, as nn.Transformer wants
        causal = torch.ones(t, t, dtype=torch.bool, device=src.device).triu(1)  # (T, T), True = future
        x = self.core(
            self.embed(src), self.embed(tgt_in), tgt_mask=causal, src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True,
        )  # fmt: skip
        return self.output(x)  # (B, T, V)


def load_batches(cfg, n: int, device: torch.device) -> tuple[list[dict], int]:
    """The first n batches of a shuffled epoch (a mix of all lengths), moved to `device` once; and the vocab size."""
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    loader = make_loader(dm.encoded("train"), cfg.data.max_tokens, shuffle=True, seed=cfg.seed)
    batches = [
        {**{k: b[k].to(device) for k in ("src", "tgt_in", "tgt_out")}, "src_tokens": b["src_tokens"],
         "tgt_tokens": b["tgt_tokens"]}
        for b in itertools.islice(loader, n)
    ]  # fmt: skip
    if len(batches) < n:
        raise ValueError(f"asked for {n} batches but the training split has only {len(batches)}")
    return batches, dm.tokenizer.vocab_size


@torch.no_grad()
def check_same_function(a: nn.Module, b: nn.Module, batch: dict) -> None:
    """With equal weights and dropout off, both models must give the same logits on real (non-pad) targets."""
    a.eval(), b.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nn.TransformerEncoder's inference fast path warns about nested tensors
        diff = (a(batch["src"], batch["tgt_in"]) - b(batch["src"], batch["tgt_in"]))[batch["tgt_out"] != PAD_ID]
    if diff.abs().max() > 1e-3:
        raise RuntimeError(
            f"the nn.Transformer baseline differs from ablate by {diff.abs().max():.2e} in logits; it mirrors only "
            "the paper's variant (post-norm, sinusoidal, all embeddings tied, scaled dot-product attention)"
        )
    a.train(), b.train()


def train_step(model: nn.Module, opt: torch.optim.Optimizer, batch: dict, label_smoothing: float) -> None:
    logits = model(batch["src"], batch["tgt_in"]).flatten(0, 1)  # (B*T, V)
    target = batch["tgt_out"].flatten()  # (B*T,)
    loss = F.cross_entropy(logits, target, ignore_index=PAD_ID, label_smoothing=label_smoothing, reduction="sum")
    (loss / batch["tgt_tokens"]).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def timed_pass(model, opt, batches: list[dict], label_smoothing: float, device: torch.device) -> float:
    """Seconds for one training step on each batch (CUDA work finished on both ends)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for batch in batches:
        train_step(model, opt, batch, label_smoothing)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def measure(models: dict, opts: dict, batches: list[dict], rounds: int, smoothing: float, device) -> tuple[dict, dict]:
    """Seconds per pass over `batches`, per model and round, alternating who goes first; peak CUDA memory per model."""
    seconds, peak_mem = {name: [] for name in models}, dict.fromkeys(models, 0)
    tgt_tokens = sum(b["tgt_tokens"] for b in batches)
    for r in range(rounds):
        for name in list(models)[:: 1 if r % 2 == 0 else -1]:
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            seconds[name].append(timed_pass(models[name], opts[name], batches, smoothing, device))
            if device.type == "cuda":
                peak_mem[name] = max(peak_mem[name], torch.cuda.max_memory_allocated(device))
        speeds = "  ".join(f"{name} {tgt_tokens / s[-1]:,.0f} tgt tok/s" for name, s in seconds.items())
        print(f"round {r + 1}/{rounds}: {speeds}")
    return seconds, peak_mem


def print_table(results: dict, title: str, gpu: bool) -> None:
    table = Table(title=title)
    for col in ("model", "params", "tgt tok/s", "src tok/s", "ms/step") + (("peak GPU MiB",) if gpu else ()):
        table.add_column(col, justify="left" if col == "model" else "right")
    for name, r in results.items():
        cells = [name, f"{r['params']:,}", f"{r['tgt_tokens_per_s']:,.0f}", f"{r['src_tokens_per_s']:,.0f}"]
        table.add_row(*cells, f"{r['step_ms']:.1f}", *([f"{r['peak_gpu_mem_mib']:,.0f}"] if gpu else []))
    Console(width=100).print(table)


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), platform.machine())


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", nargs="+", default=["experiments/multi30k-small.yaml"], help="experiment YAML file(s)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides, e.g. model.d_ff=2048")
    p.add_argument("--steps", type=int, default=30, help="timed batches per model per round")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps per model before the first round")
    p.add_argument("--rounds", type=int, default=5, help="measurement rounds; the models alternate within each")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--lr", type=float, default=1e-4, help="constant Adam learning rate")
    p.add_argument("--json", metavar="OUT", help="also write the results to this JSON file")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cfg = load_config(args.config, args.set)
    m, t = cfg.model, cfg.train
    batches, vocab_size = load_batches(cfg, args.warmup + args.steps, device)
    warmup, timed = batches[: args.warmup], batches[args.warmup :]
    src_tokens, tgt_tokens = sum(b["src_tokens"] for b in timed), sum(b["tgt_tokens"] for b in timed)
    padded = sum(b["src"].numel() + b["tgt_out"].numel() for b in timed)
    sentences = sum(b["src"].size(0) for b in timed)

    torch.manual_seed(cfg.seed)
    models = {"ablate": build_transformer(m, vocab_size), "nn.Transformer": TorchTransformer(m, vocab_size)}
    models["nn.Transformer"].copy_from(models["ablate"])
    for model in models.values():
        model.to(device)
    check_same_function(*models.values(), batches[0])
    params = {name: sum(p.numel() for p in model.parameters()) for name, model in models.items()}
    assert params["ablate"] == count_parameters(models["ablate"])["total"]
    opts = {}
    for name, model in models.items():
        opts[name] = torch.optim.Adam(model.parameters(), lr=args.lr, betas=tuple(t.betas), eps=t.eps)
        timed_pass(model, opts[name], warmup, t.label_smoothing, device)
    seconds, peak_mem = measure(models, opts, timed, args.rounds, t.label_smoothing, device)

    results = {}
    for name, secs in seconds.items():
        results[name] = {
            "params": params[name],
            "tgt_tokens_per_s": statistics.median(tgt_tokens / s for s in secs),
            "src_tokens_per_s": statistics.median(src_tokens / s for s in secs),
            "step_ms": statistics.median(1000 * s / args.steps for s in secs),
            "round_seconds": secs,
        }
        if device.type == "cuda":
            results[name]["peak_gpu_mem_mib"] = peak_mem[name] / 2**20
    ratios = [b / a for a, b in zip(seconds["ablate"], seconds["nn.Transformer"])]  # paired: same round, same noise
    ratio = statistics.median(ratios)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    env = {"torch": torch.__version__, "device": str(device), "machine": machine(device),
           "threads": torch.get_num_threads(), "date": date}  # fmt: skip

    gpu = device.type == "cuda"
    print_table(results, f"training throughput, {args.steps} Multi30k batches x {args.rounds} rounds (medians)", gpu)
    real = src_tokens + tgt_tokens
    print(f"model: {m.enc_layers}+{m.dec_layers} layers, d_model {m.d_model}, d_ff {m.d_ff}, heads {m.heads}, "
          f"dropout {m.dropout}, vocab {vocab_size}, fp32")  # fmt: skip
    print(f"batches (mean): {sentences / args.steps:.0f} sentences, {real / args.steps:.0f} real tokens, "
          f"{1 - real / padded:.1%} padding, max_tokens {cfg.data.max_tokens}")  # fmt: skip
    print(f"torch {env['torch']}, {env['machine']}, {env['threads']} threads; "
          f"process peak RSS {rss_mib:,.0f} MiB (both models)")  # fmt: skip
    print(f"per-round ratios: {', '.join(f'{x:.3f}' for x in ratios)}")
    print(f"training throughput ratio vs nn.Transformer: {ratio:.2f}")
    if args.json:
        batch_info = {"count": args.steps, "sentences": sentences, "src_tokens": src_tokens, "tgt_tokens": tgt_tokens}
        out = {"args": vars(args), "env": env, "batches": batch_info, "results": results, "ratio": ratio,
               "round_ratios": ratios, "peak_rss_mib": rss_mib}  # fmt: skip
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
