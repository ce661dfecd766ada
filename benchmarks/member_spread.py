"""Do a row's members spread as much as independent runs? K seeds as one member group against the same K seeds as K
independent `ablate train` runs (issue 37, docs/members.md "The data members see").

A member group's seeds share one length schedule (ablate.data.member_sampler): at 8 members of Multi30k, 27% of the
batches member 0 sees are seen by another member at the same step, where independent runs share 0.3%. If data order
drives part of the seed-to-seed spread, members would spread less than runs, and a row's interval from members would
be too narrow. Both arms are the real commands: `ablate train CONFIG seed=S --members K` (seeds S..S+K-1, one batch)
and `ablate train CONFIG seed=S` for each of those seeds, each run with its own data order as `ablate train` draws it.
Reported per arm: the final validation perplexity and BLEU of every seed; the sd within batches, pooled, and its ratio
(members / runs) with a 90% interval (F distribution); the Brown-Forsythe test of equal spread (absolute deviations
from each batch's median) and Welch's t test of equal means. Two workers (one thread each) share the jobs: the member
group is one job, each run one. `--combine` compares the batches of earlier result files together (each batch's
members spread about their own group's mean).
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/member_spread.py [--members 12] [--first-seed 1] [--json F] [KEY=VALUE ...]
     python benchmarks/member_spread.py --combine A.json B.json [--json F]
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

METRICS = ("val/ppl", "val/bleu")


def finals(run: Path) -> dict[str, float]:
    last = json.loads((run / "summary.json").read_text())["last"]
    return {m: float(last[m]) for m in METRICS}


def _pooled_sd(batches: list[list[float]]) -> tuple[float, int]:
    """The standard deviation within batches, pooled (each batch about its own mean), and its degrees of freedom."""
    df = sum(len(b) - 1 for b in batches)
    return math.sqrt(sum((len(b) - 1) * statistics.variance(b) for b in batches) / df), df


def spread(members: list[list[float]], runs: list[list[float]]) -> dict:
    """The two arms' spreads compared, batch by batch (a batch: one member group and the same seeds as runs): the sd
    within batches, pooled, and its ratio (members / runs) with a 90% F interval; Brown-Forsythe (absolute deviations
    from each batch's median); Welch's t test of the means."""
    (sd_m, df_m), (sd_r, df_r) = _pooled_sd(members), _pooled_sd(runs)
    flat_m, flat_r = [x for b in members for x in b], [x for b in runs for x in b]
    out = {
        "members": {"mean": statistics.mean(flat_m), "sd": sd_m, "df": df_m},
        "runs": {"mean": statistics.mean(flat_r), "sd": sd_r, "df": df_r},
        "sd_ratio": None,  # undefined where an arm does not vary at all (BLEU 0 for every seed of a tiny model)
        "sd_ratio_interval_90": None,
        "brown_forsythe_p": None,
        "welch_p": None,
    }
    if sd_m == 0 or sd_r == 0:
        return out
    ratio = (sd_m / sd_r) ** 2
    upper_q, lower_q = stats.f.ppf(0.95, df_m, df_r), stats.f.ppf(0.05, df_m, df_r)
    deviations = [[abs(x - statistics.median(b)) for b in arm for x in b] for arm in (members, runs)]
    out["sd_ratio"] = math.sqrt(ratio)
    out["sd_ratio_interval_90"] = [math.sqrt(ratio / upper_q), math.sqrt(ratio / lower_q)]
    out["brown_forsythe_p"] = float(stats.f_oneway(*deviations).pvalue)
    out["welch_p"] = float(stats.ttest_ind(flat_m, flat_r, equal_var=False).pvalue)
    return out


def measure(args) -> dict:
    """One batch: a group of K members (seeds first_seed ..) and the same seeds as K runs, two workers."""
    work = Path(tempfile.mkdtemp(prefix="ablate-member-spread-"))
    common = [args.config, *args.overrides, "logging.wandb=false", "logging.progress=false", "train.num_threads=1"]
    seeds = list(range(args.first_seed, args.first_seed + args.members))
    group = (f"out_dir={work}/group", f"seed={args.first_seed}", "--members", str(args.members))
    jobs = [group] + [(f"seed={s}", f"out_dir={work}/run-{s}") for s in seeds]
    try:
        timed_train(*common, "train.max_steps=1", "train.val_every_steps=1", "train.val_max_sentences=2", f"out_dir={work}/warm")
        with ThreadPoolExecutor(2) as pool:
            seconds = list(pool.map(lambda job: timed_train(*common, *job), jobs))
        arms = {"members": [finals(work / "group" / f"seed={s}") for s in seeds], "runs": [finals(work / f"run-{s}") for s in seeds]}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    values = {m: {arm: [x[m] for x in arms[arm]] for arm in arms} for m in METRICS}
    return {
        "seeds": seeds,
        "seconds": {"members": seconds[0], "runs": seconds[1:]},
        "values": values,
        "environment": environment(torch.device("cpu")),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="experiments/quickstart.yaml")
    p.add_argument("--members", type=int, default=12)
    p.add_argument("--first-seed", type=int, default=1, help="the batch's seeds: FIRST .. FIRST+members-1")
    p.add_argument("--combine", type=Path, nargs="+", help="result files of earlier batches (same config): compared together")
    p.add_argument("--json", type=Path)
    p.add_argument("overrides", nargs="*", help="KEY=VALUE for both arms")
    args = p.parse_args()
    if args.combine:
        earlier = [json.loads(f.read_text()) for f in args.combine]
        if len({(e["config"], tuple(e["overrides"])) for e in earlier}) > 1:
            raise SystemExit("--combine: the result files measured different configs or overrides")
        config, overrides, batches = earlier[0]["config"], earlier[0]["overrides"], [b for e in earlier for b in e["batches"]]
    else:
        config, overrides, batches = args.config, args.overrides, [measure(args)]
    result = {
        "config": config,
        "overrides": overrides,
        "batches": batches,
        **{m: spread([b["values"][m]["members"] for b in batches], [b["values"][m]["runs"] for b in batches]) for m in METRICS},
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
        print(f"{len(batches)} batch(es), {sum(len(b['seeds']) for b in batches)} seeds an arm: {line}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
