"""Whole commands: `ablate train CONFIG --members K` against the same K runs as K `ablate train` commands one after
another (issue 37, stage 2). Each arm is timed from outside, process start to exit: importing, reading and encoding
the corpus, training, validating, the final decoding and the files each run leaves; the arms take turns, round by
round, and the ratio is taken pair by pair, so a machine whose speed drifts shifts both. The tokenizer is trained once
before the rounds (a study past its first trial has it cached). Each member's and run's final validation perplexity
is reported beside, seed by seed (members and runs see different batches: each member its own of one length schedule).
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/members_commands.py [--members 4] [--rounds 3] [--json F] [KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import torch  # noqa: E402
from common import environment, timed_train  # noqa: E402


def ppl(run: Path) -> float:
    return json.loads((run / "summary.json").read_text())["last"]["val/ppl"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="experiments/quickstart.yaml")
    p.add_argument("--members", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", type=Path)
    p.add_argument("overrides", nargs="*", help="KEY=VALUE for both arms (e.g. train.max_steps=100)")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ablate-members-commands-"))
    common = [args.config, *args.overrides, "logging.wandb=false", "logging.progress=false"]
    timed_train(*common, "train.max_steps=1", "train.val_every_steps=1", "train.val_max_sentences=2", f"out_dir={work}/warm")
    rounds = []
    try:
        for r in range(args.rounds):
            group = work / f"group-{r}"
            members = timed_train(*common, f"out_dir={group}", "--members", str(args.members))
            runs = sum(timed_train(*common, f"seed={1 + k}", f"out_dir={work}/run-{r}-{k}") for k in range(args.members))
            rounds.append(
                {
                    "members_s": members,
                    "runs_s": runs,
                    "ratio_runs_over_members": runs / members,
                    "ppl_members": [ppl(group / f"seed={1 + k}") for k in range(args.members)],
                    "ppl_runs": [ppl(work / f"run-{r}-{k}") for k in range(args.members)],
                }
            )
            print(f"round {r + 1}: members {members:.1f} s, runs one after another {runs:.1f} s: {runs / members:.2f}x", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = [x["ratio_runs_over_members"] for x in rounds]
    result = {
        "config": args.config,
        "overrides": args.overrides,
        "members": args.members,
        "rounds": rounds,
        "median_members_s": statistics.median(x["members_s"] for x in rounds),
        "median_runs_s": statistics.median(x["runs_s"] for x in rounds),
        "median_ratio": statistics.median(ratios),
        "environment": environment(torch.device("cpu")),
    }
    print(
        f"{args.members} runs of {args.config}: as members {result['median_members_s']:.1f} s, one after another "
        f"{result['median_runs_s']:.1f} s (medians of {len(rounds)} rounds); runs / members {result['median_ratio']:.2f}x "
        f"(pairs {min(ratios):.2f}-{max(ratios):.2f})"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
