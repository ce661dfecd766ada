"""`ablate table STUDY`: a finished sweep in the layout of the paper's Table 3, beside the paper's figures, with
seed intervals, paired tests against the base row and a verdict per row on the split `--split` names."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ablate.atomic import replacing
from ablate.table import page
from ablate.table.compare import make_table
from ablate.table.latex import to_latex
from ablate.table.load import runs_from_dirs, runs_from_wandb, select
from ablate.table.plot import plot
from ablate.table.render import print_table, to_agreement_csv, to_csv, to_json, to_markdown
from ablate.table.significance import collect


def table_cli(args: argparse.Namespace) -> int:
    if args.plugins:
        from ablate.plugins import load_plugins

        load_plugins(args.plugins)
    source = Path(args.study)
    if source.is_file():  # a sweep file: tabulate its out_dir
        from ablate.sweep import load_sweep

        source = load_sweep(source).out_dir
    if not source.exists():
        raise FileNotFoundError(f"no such study directory: {source}")
    runs = runs_from_wandb(source) if args.wandb else runs_from_dirs(source)
    if not runs:
        kind = "W&B offline runs with a summary" if args.wandb else "finished runs (config.yaml + summary.json)"
        raise ValueError(f"found no {kind} under {source}")
    runs = select(runs, args.rows, args.seeds)
    if not (math.isfinite(args.target_mde) and args.target_mde >= 0):
        raise ValueError(f"--target-mde: expected a finite ΔBLEU >= 0 (0: no seed plan), got {args.target_mde}")
    out = Path(args.out or source)
    stem = out / args.name
    page.check(stem.with_suffix(".md"))  # a page that would refuse the table fails before a long test-split evaluation
    evaluate = None
    if args.split == "test":  # summaries hold validation scores only: every run needs a test record, made if missing
        from ablate.table.evaluation import evaluator

        evaluate = evaluator(args.split, args.device)
    evidence = collect(runs, args.split, evaluate)
    table = make_table(runs, evidence, n_boot=args.boot, seed=args.seed, target_mde=args.target_mde or None)
    chosen = "".join(f", {what} {' '.join(map(str, v))}" for what, v in (("rows", args.rows), ("seeds", args.seeds)) if v)
    title = args.title or f"Table 3 layout: {source.name}{chosen}, {args.split} split ({len(runs)} runs)"
    out.mkdir(parents=True, exist_ok=True)
    page.write(stem.with_suffix(".md"), to_markdown(table, title))
    report = json.dumps(to_json(table, title), indent=2, ensure_ascii=False, allow_nan=False)
    writers = {
        ".tex": lambda p: p.write_text(to_latex(table, title)),
        ".csv": lambda p: to_csv(table, p),
        "-agreement.csv": (lambda p: to_agreement_csv(table, p)) if table.compares_with_paper else None,
        ".json": lambda p: p.write_text(report),
        ".png": lambda p: plot(table, p, title),
    }
    for suffix, write in writers.items():
        if write:  # each file whole or not at all: an interrupt never leaves half a table where a good one was
            with replacing(stem.with_name(stem.name + suffix)) as tmp:
                write(tmp)
    print_table(table, title)
    agreement = f", {stem.name}-agreement.csv" if table.compares_with_paper else ""
    print(f"wrote {stem}.md, .tex, .csv{agreement}, .json and .png")
    return 0
