"""What members' shared length schedule costs and shares (ablate.data.member_sampler), over one epoch of a corpus.

For each tolerance, and for K independent runs and one run alone: the padded share of a step's positions (source and
target, K x longest batch x longest sentence), and how much two members' data orders share: the share of pairs that
member 0 and member k see at the same step, and the correlation of the steps at which they see each pair, both the
mean over k = 1..K-1. Independent runs share nothing (about 1/steps); `member_data: shared` shares everything.
No training: numpy over the encoded lengths, seconds per configuration.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/member_data.py [--config F] [--members 8] [--tolerances 0 1 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from ablate.data.batching import TokenBucketBatchSampler
from ablate.data.member_sampler import MemberBatchSampler
from ablate.data.module import TranslationDataModule
from ablate.experiment import load_config

sys.path.insert(0, str(Path(__file__).parent))
from common import environment  # noqa: E402


def padded_share(steps: list[list[list[int]]], src: np.ndarray, tgt: np.ndarray) -> float:
    """Padding's share of the positions of steps padded to one shape (K lists of indices a step)."""
    real = total = 0
    for step in steps:
        rows = max(len(indices) for indices in step)
        for side in (src, tgt):
            real += sum(int(side[indices].sum()) for indices in step)
            total += len(step) * rows * max(int(side[indices].max()) for indices in step)
    return 1 - real / total


def shared_order(steps: list[list[list[int]]], pairs: int) -> dict[str, float]:
    """How much member 0's data order shares with each other member's: same-step share and step correlation."""
    k = len(steps[0])
    seen = np.full((k, pairs), -1)
    for i, step in enumerate(steps):
        for m, indices in enumerate(step):
            seen[m, indices] = i
    both = (seen >= 0).all(axis=0)  # pairs every member saw this epoch (all of them but for runs' uneven epochs)
    same = [float((seen[0, both] == seen[m, both]).mean()) for m in range(1, k)]
    corr = [float(np.corrcoef(seen[0, both], seen[m, both])[0, 1]) for m in range(1, k)]
    return {"same_step": float(np.mean(same)), "step_correlation": float(np.mean(corr))}


def measure(cfg, members: int, tolerances: list[int]) -> dict:
    dm = TranslationDataModule(cfg)
    dm.prepare_data()
    dm.setup("fit")
    train = dm.encoded("train")
    src, tgt, n = np.asarray(train.src_lens), np.asarray(train.tgt_lens), len(train.src_lens)
    seeds, out = range(1, members + 1), {"pairs": n, "max_tokens": cfg.data.max_tokens}
    for tolerance in tolerances:
        sampler = MemberBatchSampler(src, tgt, cfg.data.max_tokens, seeds=seeds, group_seed=cfg.seed, tolerance=tolerance)
        steps = list(sampler)
        classes = np.bincount(sampler.classes)
        out[f"tolerance {tolerance}"] = {"padded": padded_share(steps, src, tgt), **shared_order(steps, n),
                                         "classes": len(classes), "largest_class": int(classes.max())}  # fmt: skip
    runs = [list(TokenBucketBatchSampler(src, tgt, cfg.data.max_tokens, shuffle=True, seed=s)) for s in seeds]
    unrelated = [list(step) for step in zip(*runs)]
    out["independent runs"] = {"padded": padded_share(unrelated, src, tgt), **shared_order(unrelated, n)}
    out["one run"] = {"padded": padded_share([[batch] for batch in runs[0]], src, tgt)}
    out["steps"] = len(runs[0])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", action="append", help="experiment(s); default: table3-small and table3-gpu")
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--tolerances", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--json")
    args = parser.parse_args()
    configs = args.config or ["experiments/multi30k-table3-small.yaml", "experiments/multi30k-table3-gpu.yaml"]
    result = {"environment": environment(torch.device("cpu")), "members": args.members}
    for path in configs:
        result[path] = measure(load_config([path]), args.members, args.tolerances)
        for name, row in result[path].items():
            if isinstance(row, dict):
                print(f"{Path(path).stem:24s} {name:18s} " + "  ".join(f"{k} {v:.3g}" for k, v in row.items()), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
