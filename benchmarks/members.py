"""K runs trained as one member model against the same K runs trained one after another (issue 37, stage 1).

Each member k has its own seed (1..K), its own batches (ablate.data.member_sampler: one length schedule for the
group) and its own weights. Three ways to train them, on the same batches, taking turns round by round:
  runs      K ordinary models, one after another, each as `ablate train` steps it (translation_loss, Adam, schedule);
  member-1  member 0 alone through the member code (MemberTraining with K=1), against run 0 alone;
  members   all K at once (MemberTraining): on a CPU member by member (ablate.model.member_loop), with --batched
            in one pass for all members, the path accelerators take.
Throughput counts real target tokens. Reported: the padded share of the member batches, tokens/s (all members, per
member, one run, the runs one after another), the ratios (all members' tokens/s over one run's: trials per hour at
equal steps; the runs one after another's time over the members'; member-1's step time over run 0's), and peak
memory, each measured
in a fresh process: its peak minus the memory before any model is built (CPU: resident set; CUDA: torch's peak
allocation). Medians over rounds; ratios are paired within a round.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/members.py --members 8 --threads 1 [--device cuda] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import ablate.model.member_loss
from ablate.config import to_dict
from ablate.data.batching import collate
from ablate.data.member_batches import collate_members
from ablate.data.member_sampler import MemberBatchSampler
from ablate.data.module import TranslationDataModule
from ablate.experiment import from_dict, load_config
from ablate.model import build_transformer
from ablate.model.loss import translation_loss
from ablate.training.flops import peak_flops, train_flops
from ablate.training.host_memory import keep_freed_memory
from ablate.training.member_training import MemberTraining, initial_weights
from ablate.training.module import noam_factor
from ablate.training.precision import Precision

sys.path.insert(0, str(Path(__file__).parent))
from common import environment, peak_rss, reset_peak_rss, to_device  # noqa: E402


def member_configs(cfg, k: int) -> list:
    """K copies of the experiment with seeds 1..K (what a sweep row's seeds would be)."""
    return [from_dict({**to_dict(cfg), "seed": seed}) for seed in range(1, k + 1)]


def load_steps(cfg, k: int, steps: int, tolerance: int = 3) -> tuple[list[list], int]:
    """`steps` steps of K members' own samples (EncodedSplit items) and the vocabulary size."""
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    train = dm.encoded("train")
    sampler = MemberBatchSampler(
        train.src_lens, train.tgt_lens, cfg.data.max_tokens, seeds=range(1, k + 1), group_seed=cfg.seed, tolerance=tolerance
    )
    out = []
    for step in sampler:
        out.append([[train[i] for i in indices] for indices in step])
        if len(out) == steps:
            return out, dm.tokenizer.vocab_size
    raise ValueError(f"asked for {steps} steps but an epoch has {len(out)}")


class Run:
    """One ordinary run as TranslationModule steps it."""

    def __init__(self, cfg, vocab: int, device):
        self.cfg = cfg
        self.model = build_transformer(cfg.model, vocab)
        self.model.load_state_dict(initial_weights(cfg, vocab))
        self.model.to(device).train()
        t = cfg.train
        fused = torch.device(device).type == "cuda"
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1.0, betas=tuple(t.betas), eps=t.eps, fused=fused or None)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: noam_factor(s + 1, cfg.model.d_model, t.warmup, t.lr_scale))

    def step(self, batch: dict) -> None:
        loss, _, ntok = translation_loss(self.model, batch, self.cfg.train.label_smoothing)
        (loss / ntok).backward()
        self.opt.step()
        self.schedule.step()
        self.opt.zero_grad(set_to_none=True)


def batches_for(way: str, steps: list[list], device) -> list:
    if way == "members":
        return [to_device(collate_members(step), device) for step in steps]
    if way == "member-1":
        return [to_device(collate_members(step[:1]), device) for step in steps]
    if way == "run-0":
        return [to_device(collate(step[0]), device) for step in steps]
    return [[to_device(collate(samples), device) for samples in step] for step in steps]  # runs: K per step


def trainer_for(way: str, configs: list, vocab: int, device):
    if way == "members":
        return MemberTraining(configs, vocab, device=device).step
    if way == "member-1":
        return MemberTraining(configs[:1], vocab, device=device).step
    if way == "run-0":
        return Run(configs[0], vocab, device).step
    runs = [Run(c, vocab, device) for c in configs]

    def step(batches: list) -> None:
        for run, batch in zip(runs, batches):
            run.step(batch)

    return step


PRECISION = "fp32"  # or "bf16": autocast, as Lightning's bf16-mixed (set from --precision)


def timed(step, batches: list, device) -> float:
    kind = torch.device(device).type
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    with torch.autocast(kind, dtype=torch.bfloat16, enabled=PRECISION == "bf16"):
        for batch in batches:
            step(batch)
    sync()
    return time.perf_counter() - start


WAYS = ("runs", "members", "run-0", "member-1")


def memory_child(args) -> None:
    """In a fresh process: the memory one way of training adds at its peak over the process before any model."""
    cfg = load_config([args.config], args.overrides)
    configs = member_configs(cfg, args.members)
    steps, vocab = load_steps(cfg, args.members, args.memory_steps, args.tolerance)
    batches = batches_for(args.memory_child, steps, args.device)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = reset_peak_rss()
    timed(trainer_for(args.memory_child, configs, vocab, args.device), batches, args.device)
    peak = torch.cuda.max_memory_allocated() if args.device == "cuda" else peak_rss()
    print(json.dumps({"peak_mib": (peak - before) / 2**20}))


def peak_memory(args, way: str) -> float:
    command = [sys.executable, __file__, "--memory-child", way, "--config", args.config, "--members", str(args.members)]
    command += [
        "--device",
        args.device,
        "--precision",
        args.precision,
        "--threads",
        str(args.threads),
        "--memory-steps",
        str(args.memory_steps),
        "--tolerance",
        str(args.tolerance),
        *(["--batched"] if args.batched else []),
        *args.overrides,
    ]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_mib"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="experiments/multi30k-table3-small.yaml")
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--steps", type=int, default=10, help="training steps timed per round and way")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--memory-steps", type=int, default=3)
    p.add_argument(
        "--tolerance", type=int, default=3, help="MemberBatchSampler's: 0 pads the members' batches as one run's (what training uses: 3)"
    )
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--batched", action="store_true", help="members in one pass on a CPU too (the path accelerators take)")
    p.add_argument("--json")
    p.add_argument("--memory-child", choices=WAYS, help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="config overrides, KEY=VALUE")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # as `ablate train` does, for every way
    global PRECISION
    PRECISION = args.precision
    if args.batched:
        ablate.model.member_loss.member_by_member = lambda src: False
    if args.memory_child:
        return memory_child(args)

    cfg = load_config([args.config], args.overrides)
    configs = member_configs(cfg, args.members)
    steps, vocab = load_steps(cfg, args.members, args.steps, args.tolerance)
    member_batches = batches_for("members", steps, args.device)
    tokens = [sum(len(t) + 1 for _, _, t in step[k]) for k in range(args.members) for step in steps]
    total_tokens, run0_tokens = sum(tokens), sum(len(t) + 1 for step in steps for _, _, t in step[0])
    padded = statistics.mean(b["padded"] for b in member_batches)
    ways = {way: (trainer_for(way, configs, vocab, args.device), batches_for(way, steps, args.device)) for way in WAYS}
    for step, batches in ways.values():  # warm-up: every shape once (allocator, kernels)
        timed(step, batches, args.device)
    seconds = {way: [] for way in WAYS}
    for r in range(args.rounds):
        order = WAYS[r % len(WAYS) :] + WAYS[: r % len(WAYS)]
        for way in order:
            seconds[way].append(timed(*ways[way], args.device))
        print(f"round {r + 1}/{args.rounds}: " + "  ".join(f"{w} {seconds[w][-1]:.2f}s" for w in WAYS), flush=True)

    median = {way: statistics.median(s) for way, s in seconds.items()}
    rounds = range(args.rounds)
    result = {
        "environment": environment(torch.device(args.device)),
        "config": args.config,
        "precision": args.precision,
        "overrides": args.overrides,
        "members": args.members,
        "steps": args.steps,
        "rounds": args.rounds,
        "tolerance": args.tolerance,
        "batched": args.batched or torch.device(args.device).type != "cpu",
        "padded_share": padded,
        "seconds_median": median,
        "tokens_per_s": {
            "one_run": run0_tokens / median["run-0"],
            "runs_one_after_another": total_tokens / median["runs"],
            "members": total_tokens / median["members"],
            "members_per_member": total_tokens / args.members / median["members"],
        },
        # All K members' tokens/s over one run's alone: trials per hour at equal steps against one trial at a time.
        "ratio_members_vs_one_run": statistics.median(
            (total_tokens / seconds["members"][r]) / (run0_tokens / seconds["run-0"][r]) for r in rounds
        ),
        # The same K runs trained one after another over as members: > 1 = members train them faster.
        "ratio_members_vs_runs": statistics.median(seconds["runs"][r] / seconds["members"][r] for r in rounds),
        "ratio_member1_step_vs_run": statistics.median(seconds["member-1"][r] / seconds["run-0"][r] for r in rounds),
    }
    peak = peak_flops(
        torch.device(args.device), Precision("bf16-mixed", "high") if args.precision == "bf16" else Precision("32", "highest")
    )
    if peak:  # aggregate model FLOPs of all members per second over the card's peak (ablate.training.flops)
        flops = sum(train_flops(cfg.model, vocab, collate(samples)) for step in steps for samples in step)
        result["mfu"] = {way: flops / median[way] / peak for way in ("runs", "members")}
        result["mfu"]["run-0"] = sum(train_flops(cfg.model, vocab, collate(step[0])) for step in steps) / median["run-0"] / peak
    if not args.no_memory:
        result["peak_mib"] = {way: peak_memory(args, way) for way in ("run-0", "member-1", "members")}
        one, many = result["peak_mib"]["member-1"], result["peak_mib"]["members"]
        result["memory_ratio"] = (many - one) / one  # the target: <= K - 1
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
