"""`ablate average`: its flags; the command (ablate.training.commands) imports torch."""

from __future__ import annotations

import argparse

from ablate.messages.flag_types import Number


def add_parsers(sub) -> None:
    p = sub.add_parser("average", help="average the weights of checkpoints (the paper averaged the last 5)")
    p.add_argument("checkpoints", nargs="*", help="checkpoint files; default: the last K of --run-dir")
    p.add_argument("--run-dir", help="a run's out_dir; averages its last --last checkpoints")
    p.add_argument("--last", type=Number(int, 1), default=5, help="with --run-dir: how many of its last step checkpoints (default: 5)")
    p.add_argument("--output", "-o", required=True, help="the averaged checkpoint to write (not over an existing file without --force)")
    p.add_argument("--force", action="store_true", help="replace --output if it exists")
    p.set_defaults(func=run_average)


def run_average(args: argparse.Namespace) -> int:
    from ablate.training.commands import average_cli

    return average_cli(args)
