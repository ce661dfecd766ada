"""Do a row's members spread as much as independent runs? K seeds as one member group against the same K seeds as K
independent `ablate train` runs (issue 37, docs/members.md "The data members see").

A member group's seeds share one length schedule (ablate.data.member_sampler): at 8 members of Multi30k, 27% of the
batches member 0 sees are seen by another member at the same step, where independent runs share 0.3%. If data order
drives part of the seed-to-seed spread, members would spread less than runs, and a row's interval from members would
be too narrow. Both arms are the real commands: `ablate train CONFIG --members K` (seeds 1..K) and `ablate train
CONFIG seed=S` for S in 1..K, each with its own data order as `ablate train` draws it. Reported per arm: the final
validation perplexity and BLEU of every seed, their mean and standard deviation; between arms, the ratio of standard
deviations with its 90% interval (F distribution), the Brown-Forsythe test of equal spread, and Welch's t test of
equal means. Two workers (one thread each) share the jobs: the member group is one job, each run one.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/member_spread.py [--members 12] [--json F] [KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scipy import stats

sys.path.insert(0, str(Path(__file__).parent))
import torch  # noqa: E402
from common import environment  # noqa: E402

METRICS = ("val/ppl", "val/bleu")


def ablate_train(*args: str) -> float:
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ablate.cli", "train", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ablate train {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return time.perf_counter() - began


def finals(run: Path) -> dict[str, float]:
    last = json.loads((run / "summary.json").read_text())["last"]
    return {m: float(last[m]) for m in METRICS}


def spread(members: list[float], runs: list[float]) -> dict:
    """The two arms' spreads compared: sd ratio (members / runs) with its 90% F interval, Brown-Forsythe, Welch."""
    n_m, n_r = len(members), len(runs)
    sd_m, sd_r = statistics.stdev(members), statistics.stdev(runs)
    out = {
        "members": {"values": members, "mean": statistics.mean(members), "sd": sd_m},
        "runs": {"values": runs, "mean": statistics.mean(runs), "sd": sd_r},
        "sd_ratio": None,  # undefined where an arm does not vary at all (BLEU 0 for every seed of a tiny model)
        "sd_ratio_interval_90": None,
        "brown_forsythe_p": None,
        "welch_p": None,
    }
    if sd_m == 0 or sd_r == 0:
        return out
    ratio = (sd_m / sd_r) ** 2
    upper_q, lower_q = stats.f.ppf(0.95, n_m - 1, n_r - 1), stats.f.ppf(0.05, n_m - 1, n_r - 1)
    out["sd_ratio"] = math.sqrt(ratio)
    out["sd_ratio_interval_90"] = [math.sqrt(ratio / upper_q), math.sqrt(ratio / lower_q)]
    out["brown_forsythe_p"] = float(stats.levene(members, runs, center="median").pvalue)
    out["welch_p"] = float(stats.ttest_ind(members, runs, equal_var=False).pvalue)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="experiments/quickstart.yaml")
    p.add_argument("--members", type=int, default=12)
    p.add_argument("--json", type=Path)
    p.add_argument("overrides", nargs="*", help="KEY=VALUE for both arms")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ablate-member-spread-"))
    common = [args.config, *args.overrides, "logging.wandb=false", "logging.progress=false", "train.num_threads=1"]
    ablate_train(*common, "train.max_steps=1", "train.val_every_steps=1", "train.val_max_sentences=2", f"out_dir={work}/warm")
    seeds = range(1, args.members + 1)
    jobs = [(f"out_dir={work}/group", "--members", str(args.members))] + [(f"seed={s}", f"out_dir={work}/run-{s}") for s in seeds]
    try:
        with ThreadPoolExecutor(2) as pool:
            seconds = list(pool.map(lambda job: ablate_train(*common, *job), jobs))
        arms = {
            "members": [finals(work / "group" / f"seed={s}") for s in seeds],
            "runs": [finals(work / f"run-{s}") for s in seeds],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "config": args.config,
        "overrides": args.overrides,
        "seeds": list(seeds),
        "seconds": {"members": seconds[0], "runs": seconds[1:]},
        **{m: spread([x[m] for x in arms["members"]], [x[m] for x in arms["runs"]]) for m in METRICS},
        "environment": environment(torch.device("cpu")),
    }
    for m in METRICS:
        r = result[m]
        line = f"{m}: members {r['members']['mean']:.2f} sd {r['members']['sd']:.3f}, runs {r['runs']['mean']:.2f} sd {r['runs']['sd']:.3f}"
        if r["sd_ratio"] is not None:
            low, high = r["sd_ratio_interval_90"]
            line += (
                f"; sd ratio {r['sd_ratio']:.2f} (90% {low:.2f}-{high:.2f}), Brown-Forsythe p {r['brown_forsythe_p']:.2f}, "
                f"Welch p {r['welch_p']:.2f}"
            )
        print(line)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
