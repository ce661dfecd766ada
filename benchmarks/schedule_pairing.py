"""Does a group's length schedule shift two rows alike? The same G member groups (seeds, and so schedules) trained
for the base and for another row, compared schedule by schedule (issue 37, docs/members.md "The data members see").

`ablate table` counts a member group once and takes a row's groups and the base's as independent. Where a row and
the base train the same group seeds they walk the same schedules; if a schedule helped or hurt both rows alike, a
test pairing each row group with the base group of its schedule would be narrower. Reported per metric: the two
rows' group means by schedule, their Pearson r with a 90% interval (Fisher z), and Δ = row - base with the unpaired
standard error (Welch over group means, what `ablate table` uses) and the paired one (the sd of per-schedule
differences over sqrt(G)), and their ratio. The base's groups come from a member_bias.py result (`--base-from`:
its config, overrides, groups and members) or are trained here; the row's overrides are the KEY=VALUE arguments.
Run: ABLATE_DATA_DIR=../shared/data python benchmarks/schedule_pairing.py --base-from bias.json model.positional=learned
         [--json F]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from scipy import stats

sys.path.insert(0, str(Path(__file__).parent))
import torch  # noqa: E402
from common import environment  # noqa: E402
from member_bias import train_groups  # noqa: E402
from member_spread import METRICS  # noqa: E402


def pairing(base: list[float], row: list[float]) -> dict:
    """Two rows' group means, schedule by schedule: r (90% Fisher interval), and Δ's unpaired and paired SE."""
    g = len(base)
    diffs = [b - a for a, b in zip(base, row)]
    unpaired = math.sqrt(statistics.variance(base) / g + statistics.variance(row) / g)
    paired = statistics.stdev(diffs) / math.sqrt(g)
    r = float(stats.pearsonr(base, row).statistic) if statistics.stdev(base) > 0 and statistics.stdev(row) > 0 else None
    interval = None
    if r is not None and g > 3 and abs(r) < 1:
        z, half = math.atanh(r), float(stats.norm.ppf(0.95)) / math.sqrt(g - 3)
        interval = [math.tanh(z - half), math.tanh(z + half)]
    return {
        "base": base,
        "row": row,
        "r": r,
        "r_interval_90": interval,
        "delta": statistics.mean(diffs),
        "se_unpaired": unpaired,
        "se_paired": paired,
        "se_ratio": paired / unpaired if unpaired > 0 else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-from", type=Path, help="a member_bias.py result: the base's groups")
    p.add_argument("--config", default="experiments/quickstart.yaml", help="without --base-from")
    p.add_argument("--groups", type=int, default=8, help="without --base-from")
    p.add_argument("--members", type=int, default=4, help="without --base-from")
    p.add_argument("--first-seed", type=int, default=201, help="without --base-from")
    p.add_argument("--json", type=Path)
    p.add_argument("row", nargs="+", help="KEY=VALUE: what the row changes from the base")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ablate-schedule-pairing-"))
    try:
        if args.base_from:
            earlier = json.loads(args.base_from.read_text())
            args.config, base_overrides = earlier["config"], earlier["overrides"]
            firsts = [g["first_seed"] for g in earlier["groups"]]
            args.groups, args.first_seed = len(firsts), firsts[0]
            args.members = len(earlier["groups"][0]["values"][METRICS[0]])
            if firsts != [args.first_seed + g * args.members for g in range(args.groups)]:
                raise SystemExit(f"--base-from: groups starting at {firsts} are not consecutive groups of {args.members}")
            base = [{m: g["values"][m] for m in METRICS} for g in earlier["groups"]]
        else:
            base_overrides = []
            args.overrides = base_overrides
            trained, _ = train_groups(args, work / "base")
            base = [{m: [x[m] for x in group] for m in METRICS} for group in trained]
        args.overrides = [*base_overrides, *args.row]
        trained, seconds = train_groups(args, work / "row")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    row = [{m: [x[m] for x in group] for m in METRICS} for group in trained]
    result = {
        "config": args.config,
        "base_overrides": base_overrides,
        "row_overrides": args.row,
        "first_seeds": [args.first_seed + g * args.members for g in range(args.groups)],
        "members": args.members,
        "row_groups": row,
        "row_seconds": seconds,
        **{m: pairing([statistics.mean(g[m]) for g in base], [statistics.mean(g[m]) for g in row]) for m in METRICS},
        "environment": environment(torch.device("cpu")),
    }
    for m in METRICS:
        r = result[m]
        corr = (
            "r n/a"
            if r["r"] is None
            else f"r {r['r']:+.2f}" + ("" if r["r_interval_90"] is None else " (90% {:+.2f} to {:+.2f})".format(*r["r_interval_90"]))
        )
        ratio = "" if r["se_ratio"] is None else f", paired/unpaired {r['se_ratio']:.2f}"
        print(
            f"{m}: {args.groups} schedules, {corr}; Δ {r['delta']:+.2f}, SE unpaired {r['se_unpaired']:.2f}, paired {r['se_paired']:.2f}{ratio}"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
