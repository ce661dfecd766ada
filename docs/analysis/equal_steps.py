"""Rows against the base at equal updates, from the validation curves an archived study logged (metrics.csv, and
resume-N/metrics.csv for a resumed attempt, the later attempt winning where they overlap). A sensitivity check for a
study whose stopping rule ended runs at different lengths (`ablate table`'s "Training length within rows" line):
single checkpoints, validation split, Welch's t over seeds, Holm over the rows; no per-sentence test.

    python docs/analysis/equal_steps.py studies/table3-small 8000 [metric]
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import numpy as np
from scipy import stats as st

from ablate.paper import TABLE3
from ablate.table.stats import holm

PAPER = {row.name: row for row in TABLE3}
TRIAL = re.compile(r"\d+-(?P<row>.+)-s(?P<seed>\d+)$")


def curves(study: Path, metric: str) -> dict[str, dict[int, dict[int, float]]]:
    """row -> seed -> update -> value; a validation logged at step s was taken after update s + 1."""
    out: dict[str, dict[int, dict[int, float]]] = {}
    for trial in sorted((study / "trials").iterdir()):
        if not (m := TRIAL.match(trial.name)):
            continue
        values: dict[int, float] = {}
        for f in [trial / "metrics.csv", *sorted(trial.glob("resume-*/metrics.csv"))]:
            if f.exists():
                with f.open() as fh:
                    values |= {int(r["step"]) + 1: float(r[metric]) for r in csv.DictReader(fh) if r.get(metric)}
        out.setdefault(m["row"], {})[int(m["seed"])] = values
    return out


def at_update(study: Path, update: int, metric: str = "val/ppl") -> list[dict]:
    """Per row with 2+ runs that reached `update`: mean, sd, n, Δ against the base with Welch's 95% interval, p, Holm."""
    by_row = {row: [v[update] for v in seeds.values() if update in v] for row, seeds in curves(study, metric).items()}
    base = np.array(by_row.pop("base"))
    lines = []
    for row, values in sorted(by_row.items()):
        x = np.array(values)
        if len(x) < 2 or len(base) < 2:
            continue
        test = st.ttest_ind(x, base, equal_var=False)
        ci = test.confidence_interval()
        lines.append(
            {
                "row": row,
                "n": len(x),
                "mean": x.mean(),
                "sd": x.std(ddof=1),
                "delta": x.mean() - base.mean(),
                "low": ci.low,
                "high": ci.high,
                "p": test.pvalue,
            }
        )
    for line, p in zip(lines, holm([ln["p"] for ln in lines])):
        line["p_holm"] = p
    lines.insert(0, {"row": "base", "n": len(base), "mean": base.mean(), "sd": base.std(ddof=1)})
    return lines


def main(argv: list[str]) -> None:
    study, update = Path(argv[0]), int(argv[1])
    metric = argv[2] if len(argv) > 2 else "val/ppl"
    print(f"{metric} after update {update:,} ({study}): rows with 2+ runs that reached it; Welch's t, Holm over the rows")
    print("| row | n | mean | sd | Δ [95% CI] | p | p Holm | paper Δ PPL |\n|---|---|---|---|---|---|---|---|")
    base_ppl = PAPER["base"].ppl
    for ln in at_update(study, update, metric):
        paper = PAPER.get(ln["row"])
        pd = f"{paper.ppl - base_ppl:+.2f}" if paper and ln["row"] != "base" else ""
        if "delta" not in ln:
            print(f"| {ln['row']} | {ln['n']} | {ln['mean']:.2f} | {ln['sd']:.3f} | | | | |")
            continue
        fmt = lambda p: "< 0.001" if p < 0.001 else f"{p:.3f}"  # noqa: E731
        print(
            f"| {ln['row']} | {ln['n']} | {ln['mean']:.2f} | {ln['sd']:.3f} | {ln['delta']:+.2f} [{ln['low']:+.2f}, {ln['high']:+.2f}] | {fmt(ln['p'])} | {fmt(ln['p_holm'])} | {pd} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
