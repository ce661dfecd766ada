"""Do members train as well as their own runs, dropout on? K members against the same K runs trained alone (issue 37).

Member k and run k share the seed (so the initial weights), the batches (ablate.data.member_sampler, every step) and
every setting; only the dropout masks differ (one mask for the group cannot be K runs' own draws). Both train the
experiment's max_steps updates; then each is scored on the validation split by teacher-forced perplexity (eval mode,
final weights). The test of equivalence is a TOST on the paired relative differences (member - run) / run: the 90%
t interval must lie within +-margin. The two arms train at once in two processes, one thread each.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/members_equivalence.py [--members 8] [--json F]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from scipy import stats

from ablate.data.batching import collate, make_loader
from ablate.data.member_batches import collate_members
from ablate.data.member_sampler import MemberBatchSampler
from ablate.data.module import TranslationDataModule
from ablate.experiment import load_config
from ablate.model import build_transformer
from ablate.model.loss import translation_loss
from ablate.training.member_training import MemberTraining

sys.path.insert(0, str(Path(__file__).parent))
from common import environment  # noqa: E402
from members import Run, member_configs  # noqa: E402


def member_steps(dm, cfg, k: int, steps: int):
    """The first `steps` steps of K members' samples, across epochs."""
    train = dm.encoded("train")
    sampler = MemberBatchSampler(train.src_lens, train.tgt_lens, cfg.data.max_tokens, seeds=range(1, k + 1), group_seed=cfg.seed)
    epoch, done = 0, 0
    while done < steps:
        sampler.set_epoch(epoch)
        for step in sampler:
            yield [[train[i] for i in indices] for indices in step]
            done += 1
            if done == steps:
                return
        epoch += 1


@torch.no_grad()
def valid_ppl(model, dm, cfg) -> float:
    model.eval()
    nll = tokens = 0.0
    for batch in make_loader(dm.encoded("valid"), cfg.data.max_tokens, shuffle=False):
        _, batch_nll, n = translation_loss(model, batch, 0.0)
        nll, tokens = nll + float(batch_nll), tokens + int(n)
    return math.exp(nll / tokens)


def arm(args) -> None:
    """Train one arm and print its per-member validation perplexities as JSON."""
    torch.set_num_threads(1)
    cfg = load_config([args.config], args.overrides)
    configs = member_configs(cfg, args.members)
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    vocab = dm.tokenizer.vocab_size
    start = time.perf_counter()
    if args.arm == "members":
        group = MemberTraining(configs, vocab)
        for step in member_steps(dm, cfg, args.members, cfg.train.max_steps):
            group.step(collate_members(step))
        models = []
        for k in range(args.members):
            model = build_transformer(cfg.model, vocab)
            model.load_state_dict(group.member_weights(k))
            models.append(model)
    else:
        runs = [Run(c, vocab, "cpu") for c in configs]
        for step in member_steps(dm, cfg, args.members, cfg.train.max_steps):
            for run, samples in zip(runs, step):
                run.step(collate(samples))
        models = [run.model for run in runs]
    seconds = time.perf_counter() - start
    print(json.dumps({"ppl": [valid_ppl(m, dm, cfg) for m in models], "train_seconds": seconds}))


def tost(rel: list[float], margin: float) -> dict:
    n = len(rel)
    mean, sd = statistics.mean(rel), statistics.stdev(rel)
    half = stats.t.ppf(0.95, n - 1) * sd / math.sqrt(n)
    low, high = float(mean - half), float(mean + half)
    return {"mean": mean, "sd": sd, "interval_90": [low, high], "margin": margin, "equivalent": bool(-margin < low and high < margin)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="experiments/quickstart.yaml")
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--margin", type=float, default=0.02)
    p.add_argument("--json")
    p.add_argument("--arm", choices=("members", "runs"), help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="config overrides, KEY=VALUE")
    args = p.parse_args()
    if args.arm:
        return arm(args)
    base = [sys.executable, __file__, "--config", args.config, "--members", str(args.members), *args.overrides]
    procs = {a: subprocess.Popen([*base, "--arm", a], stdout=subprocess.PIPE, text=True) for a in ("members", "runs")}
    results = {}
    for a, proc in procs.items():
        out, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"the {a} arm failed (exit {proc.returncode})")
        results[a] = json.loads(out.strip().splitlines()[-1])
    rel = [(m - r) / r for m, r in zip(results["members"]["ppl"], results["runs"]["ppl"])]
    cfg = load_config([args.config], args.overrides)
    summary = {
        "environment": environment(torch.device("cpu")),
        "config": args.config,
        "overrides": args.overrides,
        "members": args.members,
        "steps": cfg.train.max_steps,
        "dropout": cfg.model.dropout,
        "valid_ppl": {a: r["ppl"] for a, r in results.items()},
        "train_seconds": {a: r["train_seconds"] for a, r in results.items()},
        "relative_difference": rel,
        "tost": tost(rel, args.margin),
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
