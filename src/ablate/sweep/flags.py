"""`ablate sweep` and `ablate status`: their flags; the commands themselves (ablate.sweep.commands) import Optuna."""

from __future__ import annotations

import argparse

from ablate.config.validation import MAX_MEMBERS, MAX_PARALLEL
from ablate.messages.flag_types import Number

SWEEP_EXITS = """exit codes:
  0    the study ran and has results; rows that failed by themselves are named on stderr with their logs
  1    every trial that ran failed: each row is named on stderr with its log (RUN_DIR/train.log)
  2    a usage or sweep file error; nothing started
  75   stopped by SIGTERM/SIGUSR1: running trials saved a checkpoint; run the same command to continue. Also
       when runs are left unfinished (a worker killed, or a run interrupted more times than it is retried):
       each is named on stderr, and the same command continues it; and when a full disk stopped it once
       trials had started (free space, then the same command continues it) or its database server was lost
  130  stopped by Ctrl-C, as for 75"""


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a sweep file (variants or an Optuna search) as one study",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=SWEEP_EXITS,
    )
    p.add_argument("file", help="a sweeps/*.yaml file")
    p.add_argument(
        "--workers",
        type=Number(int, 1, MAX_PARALLEL),
        default=None,
        metavar="N",
        help="trials at once (default: all GPU slots, else the file's workers)",
    )
    p.add_argument(
        "--trials-per-gpu", default=None, metavar="N", help="trials sharing each GPU, N or auto (overrides the file's trials_per_gpu)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the trials and their differences from the base config")
    p.add_argument(
        "--storage",
        metavar="URL",
        help="sqlite:///, postgresql:// or journal:/// URL (default: $ABLATE_SWEEP_STORAGE, else the file's storage, else "
        "SQLite in the sweep's out_dir)",
    )
    p.add_argument(
        "--n-trials",
        type=Number(int, 1),
        default=None,
        metavar="N",
        help="a search's trial budget (overrides the file's n_trials; a variants sweep refuses it)",
    )
    p.add_argument(
        "--members",
        type=members_flag,
        default=None,
        metavar="K",
        help="train K trials of a row (its seeds; a search's draws) at once as members of one model, K or auto (on GPUs: "
        "as many as fit); overrides the file's members",
    )
    p.set_defaults(func=run_sweep)

    p = sub.add_parser("status", help="what a sweep is doing or did: each trial's progress, the counts, the best row")
    p.add_argument("target", help="a sweep's out_dir, its sweep file, or a storage URL (sqlite:///, postgresql://, journal:///)")
    p.add_argument("--study", help="the study's name, when the storage holds several")
    p.set_defaults(func=run_status)


def members_flag(text: str) -> int | str:
    """--members: an integer >= 1 or auto."""
    if text.strip().lower() == "auto":
        return "auto"
    return Number(int, 1, MAX_MEMBERS)(text)


def run_sweep(args: argparse.Namespace) -> int:
    from ablate.sweep.commands import sweep_cli

    return sweep_cli(args)


def run_status(args: argparse.Namespace) -> int:
    from ablate.sweep.commands import status_cli

    return status_cli(args)
