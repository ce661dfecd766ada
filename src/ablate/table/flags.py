"""`ablate table`: its flags; the command (ablate.table.commands) imports the statistics and the runs."""

from __future__ import annotations

import argparse

from ablate.config.validation import SEED_MAX
from ablate.messages.flag_types import MAX_BOOT, Number, add_plugins_flag


def add_parsers(sub) -> None:
    p = sub.add_parser("table", help="a finished sweep in the paper's Table 3 layout, beside the paper's figures")
    p.add_argument("study", help="a sweep's out_dir (or its sweep file), or any folder of runs")
    p.add_argument("--wandb", action="store_true", help="read W&B offline run files under STUDY instead of run directories")
    p.add_argument(
        "--out",
        help="folder for NAME.{md,tex,csv,json,png} and NAME-agreement.csv (default: ./tables/FOLDER/, FOLDER the study "
        "folder's name, so a study's own folder, which may be committed evidence, is never written unless named here)",
    )
    p.add_argument("--force", action="store_true", help="replace output files that hold other content (default: refuse, writing nothing)")
    p.add_argument("--name", default="table3", help="file name stem (default: table3)")
    p.add_argument("--title", help="table title")
    p.add_argument(
        "--split",
        default="valid",
        choices=["valid", "test"],
        help="score on RUN/eval/SPLIT.json; with test, a run without one is evaluated from its selected checkpoint",
    )
    p.add_argument("--rows", nargs="+", metavar="ROW", help="only these rows (with base, which the others are compared to)")
    p.add_argument(
        "--seeds",
        nargs="+",
        type=Number(int, 0, SEED_MAX),
        metavar="SEED",
        help="only the runs of these seeds (e.g. same-seed comparisons)",
    )
    p.add_argument("--boot", type=Number(int, 1, MAX_BOOT), default=1000, help="bootstrap resamples for the paired tests (default: 1000)")
    p.add_argument("--seed", type=Number(int, 0, SEED_MAX), default=0, help="seed of the bootstrap resampling (default: 0)")
    p.add_argument(
        "--target-mde",
        type=Number(float, 0),
        default=1.0,
        help="the ΔBLEU a study should detect: per row, how many seeds that takes at the noise measured (default: 1.0; 0: off)",
    )
    p.add_argument(
        "--at-update",
        type=Number(int, 1),
        metavar="N",
        help="instead: each row against the base after update N, from the validation curves the runs logged (NAME-at-N.md/.json)",
    )
    p.add_argument("--metric", help="with --at-update: the logged validation metric to compare (default: val/ppl)")
    p.add_argument("--device", default="auto", help="with --split test: where to evaluate checkpoints (cpu, cuda, auto)")
    add_plugins_flag(p, "with --split test: the plugins the runs' models need (their checkpoints only record them)")
    p.set_defaults(func=run_table)


def run_table(args: argparse.Namespace) -> int:
    from ablate.table.commands import table_cli

    return table_cli(args)
