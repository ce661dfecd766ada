"""From a pilot's archive, what a study is fixed by before it starts: whether its training length is converged, and
how many seeds each row gets (docs/table3-gpu.md, "The pilot"). Reads validation records only.

    python benchmarks/pilot_plan.py PILOT [--base base] [--longer base-2x ...] [--split valid]
                                    [--reference studies/table3-small] [--target-mde 1.0] [--rows 19] [--need 14]
                                    [--min-seeds 10] [--min-base-seeds 20] [--json FILE]

Convergence: each run of a --longer row (the base trained twice as long) against the base's run of the same seed,
scored on the split's evaluation records: how much training twice as long improves corpus PPL (1 - PPL_2L / PPL_L)
and BLEU (BLEU_2L - BLEU_L), as means over seeds with 95% Student-t intervals. L is converged when at least 3 seeds
pair, the PPL improvement's upper bound is under 1% and the mean BLEU gain under 0.3. A 2L that is worse than L (past
the optimum) passes, and is said.

Seeds: the MDE `ablate table` computes (80% power at Holm's strictest level, alpha / --rows; the variance model of
`ablate.table.detectable_effect.seeds_for_mde`), from the base's per-seed variance measured in the pilot and each ablation's
relative to it taken from --reference (a finished study: each row's per-seed variance over its base's, and the
sentences' part of Var(delta), from the paired test `ablate table` runs). The plan is the fewest seeds n per row
(n >= --min-seeds, the base max(n, --min-base-seeds)) at which (a) a row as noisy as the base reaches the target,
with the reference rows' median sentences' part, and (b) the share of reference rows that reach it, times --rows,
is at least --need.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from scipy import stats as st

from ablate.config.paper import BASE_VARIANTS, row_group
from ablate.table import detectable_effect, paired_bootstrap, seed_intervals
from ablate.table.finished_runs import check_rows, runs_from_dirs
from ablate.table.sentence_records import collect

PPL_BOUND = 0.01  # the interval of the relative PPL change must lie within +-1%
BLEU_BOUND = 0.3  # and the mean BLEU change be smaller than this
MIN_PAIRS = 3


def load(study: Path, split: str) -> tuple[dict[str, list], dict]:
    """Row -> its runs (each scored on the split's common sentences), and run source -> per-sentence statistics."""
    runs = runs_from_dirs(study)
    if not runs:
        raise SystemExit(f"{study}: no finished runs (config.yaml + summary.json)")
    check_rows(runs)
    evidence = collect(runs, split)
    if missing := [r.source for r in runs if r.source not in evidence.per_run]:
        raise SystemExit(f"{study}: runs without eval/{split}.json: {', '.join(missing)}")
    rows: dict[str, list] = {}
    for run in runs:
        rows.setdefault(run.row, []).append(run)
    return rows, evidence.per_run


def convergence(rows: dict[str, list], base: str, longer: list[str]) -> dict:
    """Each --longer run against the base's run of its seed: PPL improvement (relative) and BLEU gain, with intervals."""
    if missing := [name for name in [base, *longer] if name not in rows]:
        raise SystemExit(f"no rows {missing}; the pilot has {sorted(rows)}")
    by_seed = {r.config.get("seed"): r for r in rows[base]}
    pairs = [(by_seed[r.config.get("seed")], r) for name in longer for r in rows[name] if r.config.get("seed") in by_seed]
    out = {"seeds": [b.config.get("seed") for b, _ in pairs], "updates": sorted({(b.steps, r.steps) for b, r in pairs})}
    if not pairs:
        return out | {"converged": False, "why": "no seed of the longer rows has a base run"}
    ppl = seed_intervals.t_interval([1 - r.ppl / b.ppl for b, r in pairs])
    bleu = seed_intervals.t_interval([r.bleu - b.bleu for b, r in pairs])
    out |= {"ppl_improvement": vars(ppl), "bleu_gain": vars(bleu)}
    if len(pairs) < MIN_PAIRS or ppl.high is None:
        return out | {"converged": False, "why": f"{len(pairs)} seeds pair; {MIN_PAIRS} are needed for an interval to decide on"}
    ok = ppl.high < PPL_BOUND and bleu.mean < BLEU_BOUND
    why = f"PPL improvement's upper bound {ppl.high:+.2%} {'<' if ppl.high < PPL_BOUND else '>='} {PPL_BOUND:.0%}, "
    why += f"mean BLEU gain {bleu.mean:+.2f} {'<' if bleu.mean < BLEU_BOUND else '>='} {BLEU_BOUND}"
    if ppl.mean < -PPL_BOUND or bleu.mean < -BLEU_BOUND:
        why += "; 2L scores worse than L (past the optimum: a shorter L may do as well)"
    return out | {"converged": ok, "why": why}


def per_seed_variance(row_stats: list) -> float:
    """One seed's variance of corpus BLEU about its system's mean (sigma^2 + tau^2, what `Noise.base` holds), from the
    row tested against itself: the difference is 0 in every resample, so the test's noise holds the seed parts alone."""
    if len(row_stats) < 2:
        raise SystemExit("the base needs 2 or more seeds for a seed spread")
    return paired_bootstrap.paired_bleu_stats(row_stats, row_stats, n_boot=1000, seed=0).noise.base


def reference_rows(rows: dict[str, list], per_run: dict) -> list[dict]:
    """Each ablation (not the base, not a control) of a finished study: its per-seed variance over the base's, and the
    sentences' part of its test's Var(delta); rows with one seed have no variance to give."""
    base = [per_run[r.source]["bleu"] for r in rows["base"]]
    out = []
    for name, runs in rows.items():
        if name == "base" or row_group(name) == BASE_VARIANTS:
            continue
        noise = paired_bootstrap.paired_bleu_stats(base, [per_run[r.source]["bleu"] for r in runs], n_boot=1000, seed=0).noise
        if noise is not None and noise.base > 0:
            out.append({"row": name, "ratio": noise.row / noise.base, "sentences": noise.sentences})
    return out


def mde(sentences: float, row_var: float, base_var: float, n: int, n_base: int, m: int) -> float:
    var, df = paired_bootstrap.Noise(sentences, row_var, base_var, n, n_base).at(n, n_base)
    return detectable_effect.mde(math.sqrt(var), m=m, df=df)


def largest_ratio(sentences: float, base_var: float, n: int, n_base: int, args: argparse.Namespace) -> float:
    """The largest per-seed variance, as a multiple of the base's (in steps of 0.01, up to 20), at which a row with
    n seeds still reaches the target MDE."""
    fits = [k / 100 for k in range(1, 2001) if mde(sentences, k / 100 * base_var, base_var, n, n_base, args.rows) <= args.target_mde]
    return max(fits, default=0.0)


def plan(base_var: float, refs: list[dict], args: argparse.Namespace) -> dict | None:
    """The fewest seeds a row meeting both rules (module docstring), with each reference row's MDE there."""
    typical = statistics.median([r["sentences"] for r in refs]) if refs else 0.0
    for n in range(args.min_seeds, detectable_effect.MOST_SEEDS + 1):
        n_base = max(n, args.min_base_seeds)
        as_base = mde(typical, base_var, base_var, n, n_base, args.rows)
        mdes = {r["row"]: mde(r["sentences"], r["ratio"] * base_var, base_var, n, n_base, args.rows) for r in refs}
        predicted = args.rows * (sum(v <= args.target_mde for v in mdes.values()) / len(mdes) if mdes else 1.0)
        if as_base <= args.target_mde and predicted >= args.need:
            tolerance = largest_ratio(typical, base_var, n, n_base, args)
            return {
                "seeds": n,
                "base_seeds": n_base,
                "mde_as_base": as_base,
                "predicted_rows": predicted,
                "largest_ratio": tolerance,
                "mde": mdes,
            }
    return None


def upper_variance(var: float, n: int, level: float = 0.8) -> float:
    """The one-sided `level` upper bound of a variance estimated from n seeds (chi-square, n - 1 df)."""
    return var * (n - 1) / st.chi2.ppf(1 - level, n - 1)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pilot", type=Path, help="the pilot's archive (or any folder of runs)")
    p.add_argument("--base", default="base", help="the row at the candidate length L (default: base)")
    p.add_argument("--longer", nargs="+", default=["base-2x"], help="rows of the base trained twice as long (default: base-2x)")
    p.add_argument("--plan-row", help="the row whose seed spread the plan uses (default: --base, the length the study runs)")
    p.add_argument(
        "--split", default="valid", choices=["valid", "test"], help="records to read (default: valid; a design never reads test)"
    )
    p.add_argument("--reference", type=Path, help="a finished study whose rows' variance relative to its base the plan assumes")
    p.add_argument("--target-mde", type=float, default=1.0)
    p.add_argument("--rows", type=int, default=19, help="ablations in the study's Holm family (default: Table 3's 19)")
    p.add_argument("--need", type=float, default=14, help="rows predicted to reach the target (default: 14)")
    p.add_argument("--min-seeds", type=int, default=10)
    p.add_argument("--min-base-seeds", type=int, default=20)
    p.add_argument("--base-sd", type=float, help="plan as if one seed's BLEU sd in the base were this (a what-if before the pilot)")
    p.add_argument("--json", type=Path, help="also write everything as JSON here")
    return p.parse_args(argv)


def show(out: dict, args: argparse.Namespace) -> None:
    c = out["convergence"]
    print(
        f"pilot {args.pilot}, {args.split} split: {args.base} against {', '.join(args.longer)} (updates {c['updates']}), seeds {c['seeds']}"
    )
    for key, what, unit in (("ppl_improvement", "PPL improvement at 2L", "%"), ("bleu_gain", "BLEU gain at 2L", "")):
        if key in c:
            i, k = c[key], 100 if unit else 1
            bounds = f" [{i['low'] * k:+.2f}{unit}, {i['high'] * k:+.2f}{unit}]" if i["low"] is not None else " (no interval)"
            print(f"  {what}: {i['mean'] * k:+.2f}{unit}{bounds} over {i['n']} seeds")
    print(f"  converged: {'yes' if c['converged'] else 'no'} ({c['why']})")
    b = out["base_noise"]
    print(
        f"seed spread of '{b['row']}' ({b['seeds']} seeds): one seed's BLEU variance {b['variance']:.3f} (sd {math.sqrt(b['variance']):.2f})"
    )
    for r in out["reference"]:
        print(f"  reference {r['row']}: per-seed variance {r['ratio']:.2f}x the base's, sentences' part {r['sentences']:.4f}")
    for label, p in (("plan", out["plan"]), ("at the base variance's 80% upper bound", out["plan_upper"])):
        if p is None:
            print(f"{label}: no seed count up to {detectable_effect.MOST_SEEDS} meets both rules")
            continue
        print(
            f"{label}: {p['seeds']} seeds a row, {p['base_seeds']} for the base: MDE {p['mde_as_base']:.2f} for a row as noisy as the "
            f"base; {p['predicted_rows']:.1f} of {args.rows} rows predicted at MDE <= {args.target_mde:g}; a row passes up to "
            f"{p['largest_ratio']:.2f}x the base's per-seed variance"
        )
        if label == "plan" and p["mde"]:
            print("  MDE there: " + ", ".join(f"{row} {v:.2f}" for row, v in p["mde"].items()))


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rows, per_run = load(args.pilot, args.split)
    plan_row = args.plan_row or args.base
    base_var = per_seed_variance([per_run[r.source]["bleu"] for r in rows[plan_row]]) if args.base_sd is None else args.base_sd**2
    refs = reference_rows(*load(args.reference, args.split)) if args.reference else []
    seeds = len(rows[plan_row])
    out = {
        "convergence": convergence(rows, args.base, args.longer),
        "base_noise": {"row": plan_row if args.base_sd is None else f"--base-sd {args.base_sd:g}", "seeds": seeds, "variance": base_var},
        "reference": refs,
        "plan": plan(base_var, refs, args),
        "plan_upper": plan(upper_variance(base_var, seeds), refs, args),
    }
    show(out, args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
