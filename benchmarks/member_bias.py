"""Do members score as runs do on average? G member groups of K seeds, each group on its own length schedule (its
first seed's), against independent `ablate train` runs of the same config (issue 37, docs/members.md "The data
members see").

A member's order of batches is drawn as a run's is, so members and runs should agree in mean; the spread benchmark
(member_spread.py) found members 1.5 BLEU and 3% perplexity better, over too few schedules to tell from the
schedules' own effect. Here each group counts once, by its members' mean (as `ablate table` counts it), so the test
has G - 1 degrees of freedom on the members' side whatever K is. Reported per metric: the group means, their mean and
sd; the pooled sd of members within their groups; the variance between schedules beyond what the members' own
spread explains; and Welch's t of the group means against the runs. Two workers (one thread each) train the groups.
The runs come from earlier member_spread.py result files (`--runs-from`, their "runs" arm; the same config and
overrides) or are trained here (`--runs N`, seeds after the groups').
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/member_bias.py --groups 8 --members 4 --first-seed 201
         --runs-from benchmarks/results/member-spread-quickstart-2026-11-28-seeds*.json [--json F] [KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scipy import stats

sys.path.insert(0, str(Path(__file__).parent))
import torch  # noqa: E402
from common import environment, timed_train  # noqa: E402
from member_spread import METRICS, finals  # noqa: E402


def compare(groups: list[list[float]], runs: list[float]) -> dict:
    """Group means against runs: Welch's t (each group one value), and the variance between schedules beyond the
    members' own spread (one-way random effects: var(group means) - pooled within-group variance / K)."""
    means = [statistics.mean(g) for g in groups]
    within = statistics.mean(statistics.variance(g) for g in groups)  # groups of one size: the pooled variance
    between = statistics.variance(means) - within / statistics.mean(len(g) for g in groups)
    va, vb = statistics.variance(means) / len(means), statistics.variance(runs) / len(runs)
    delta = statistics.mean(means) - statistics.mean(runs)
    test = {"delta": delta, "delta_interval_95": None, "welch_df": None, "welch_p": None}  # no spread (BLEU 0 everywhere): no test
    if va + vb > 0:
        df = (va + vb) ** 2 / (va**2 / (len(means) - 1) + vb**2 / (len(runs) - 1))
        half = float(stats.t.ppf(0.975, df)) * math.sqrt(va + vb)
        p = float(stats.ttest_ind(means, runs, equal_var=False).pvalue)
        test |= {"delta_interval_95": [delta - half, delta + half], "welch_df": df, "welch_p": p}
    return {
        "group_means": means,
        "members": {"mean": statistics.mean(means), "sd_of_group_means": statistics.stdev(means), "groups": len(means)},
        "within_group_sd": math.sqrt(within),
        "between_schedules_sd": math.sqrt(max(between, 0.0)),
        "runs": {"mean": statistics.mean(runs), "sd": statistics.stdev(runs), "n": len(runs)},
        **test,
    }


def train_groups(args, work: Path) -> tuple[list[list[dict]], list[float]]:
    """The G groups (seeds first_seed + g*K ..), two at a time; each group's members' finals, and its seconds."""
    common = [args.config, *args.overrides, "logging.wandb=false", "logging.progress=false", "train.num_threads=1"]
    firsts = [args.first_seed + g * args.members for g in range(args.groups)]
    timed_train(*common, "train.max_steps=1", "train.val_every_steps=1", "train.val_max_sentences=2", f"out_dir={work}/warm")
    jobs = [(f"out_dir={work}/group-{s}", f"seed={s}", "--members", str(args.members)) for s in firsts]
    with ThreadPoolExecutor(2) as pool:
        seconds = list(pool.map(lambda job: timed_train(*common, *job), jobs))
    return [[finals(work / f"group-{s}" / f"seed={s + k}") for k in range(args.members)] for s in firsts], seconds


def train_runs(args, work: Path, n: int) -> list[dict]:
    common = [args.config, *args.overrides, "logging.wandb=false", "logging.progress=false", "train.num_threads=1"]
    seeds = [args.first_seed + args.groups * args.members + i for i in range(n)]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda s: timed_train(*common, f"seed={s}", f"out_dir={work}/run-{s}"), seeds))
    return [finals(work / f"run-{s}") for s in seeds]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="experiments/quickstart.yaml")
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--members", type=int, default=4)
    p.add_argument("--first-seed", type=int, default=201, help="group g's seeds: FIRST + g*K .. FIRST + g*K + K - 1")
    p.add_argument("--runs-from", type=Path, nargs="+", help="member_spread.py result files whose runs to compare with")
    p.add_argument("--runs", type=int, default=0, help="train this many runs here instead")
    p.add_argument("--json", type=Path)
    p.add_argument("overrides", nargs="*", help="KEY=VALUE for groups and runs")
    args = p.parse_args()
    if args.groups < 2 or args.members < 2 or bool(args.runs_from) == (args.runs > 0):
        raise SystemExit("give --groups >= 2, --members >= 2, and either --runs-from FILES or --runs N (N >= 2)")
    if args.runs_from:
        earlier = [json.loads(f.read_text()) for f in args.runs_from]
        if any((e["config"], e["overrides"]) != (args.config, args.overrides) for e in earlier):
            raise SystemExit("--runs-from: those runs trained another config or other overrides")
        runs = {m: [x for e in earlier for b in e["batches"] for x in b["values"][m]["runs"]] for m in METRICS}
    work = Path(tempfile.mkdtemp(prefix="ablate-member-bias-"))
    try:
        groups, seconds = train_groups(args, work)
        if args.runs:
            trained = train_runs(args, work, args.runs)
            runs = {m: [x[m] for x in trained] for m in METRICS}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "config": args.config,
        "overrides": args.overrides,
        "groups": [
            {"first_seed": args.first_seed + g * args.members, "values": {m: [x[m] for x in group] for m in METRICS}}
            for g, group in enumerate(groups)
        ],
        "group_seconds": seconds,
        "runs_from": [str(f) for f in args.runs_from or []],
        "runs": runs,
        **{m: compare([[x[m] for x in group] for group in groups], runs[m]) for m in METRICS},
        "environment": environment(torch.device("cpu")),
    }
    for m in METRICS:
        r = result[m]
        tested = (
            "no spread, no test"
            if r["welch_p"] is None
            else "[{:+.2f}, {:+.2f}], Welch p {:.3f}".format(*r["delta_interval_95"], r["welch_p"])
        )
        print(
            f"{m}: {r['members']['groups']} groups of {args.members}, mean of group means {r['members']['mean']:.2f} "
            f"(sd {r['members']['sd_of_group_means']:.2f}; within groups {r['within_group_sd']:.2f}, between schedules "
            f"{r['between_schedules_sd']:.2f}); {r['runs']['n']} runs {r['runs']['mean']:.2f} (sd {r['runs']['sd']:.2f}); "
            f"members - runs {r['delta']:+.2f} {tested}"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
