"""`ablate params` and `ablate train`: their flags; the commands (ablate.run.commands) import torch and Lightning only
once the config has loaded (a bad config is refused in a fraction of a second)."""

from __future__ import annotations

import argparse

from ablate.config.validation import MAX_MEMBERS
from ablate.messages.flag_types import Number


def add_parsers(sub) -> None:
    p = sub.add_parser("params", help="print the parameter count of a config")
    p.add_argument("config", nargs="*", help="YAML files, then key=value overrides; none: the schema's defaults")
    p.set_defaults(func=run_params)

    # No abbreviations (--auto for --auto-resume): the resume command a stopped run prints drops the flags by name
    p = sub.add_parser("train", help="train one model", allow_abbrev=False)
    # One at least: `ablate train` alone trained the schema's defaults (a 48M-parameter model, 100,000 steps) into runs/default
    p.add_argument("config", nargs="+", help="YAML files, then key=value overrides (e.g. experiments/quickstart.yaml model.heads=4)")
    p.add_argument("--resume", action="store_true", help="continue the run in out_dir from its last good checkpoint")
    p.add_argument("--auto-resume", action="store_true", help="resume when out_dir holds checkpoints, else start (for requeued jobs)")
    p.add_argument("--force", action="store_true", help="with --resume: accept a config that differs from the saved one")
    p.add_argument(
        "--accept-data-change",
        action="store_true",
        help="with --resume: go on although corpus files differ from the run's fingerprint (still with the run's own tokenizer)",
    )
    p.add_argument(
        "--move-aside",
        action="store_true",
        help="if out_dir holds an earlier run, move all out_dir holds to OUT_DIR.earlier-K and start a new run",
    )
    p.add_argument(
        "--members",
        type=Number(int, 1, MAX_MEMBERS),
        metavar="K",
        help="train K runs of the config as one model (seeds seed..seed+K-1; or give a member-able key one value per "
        "member as KEY=[v1,...]); each is an ordinary run in OUT_DIR/NAME (docs/members.md)",
    )
    p.add_argument("--member-data", choices=("own", "shared"), help="members' batches: each its own (default) or the group seed's")
    p.add_argument(
        "--print-config", action="store_true", help="print the composed, checked config as its config.yaml would hold it, and train nothing"
    )
    p.set_defaults(func=run_train)


def run_params(args: argparse.Namespace) -> int:
    from ablate.run.commands import params_command

    return params_command(args)


def run_train(args: argparse.Namespace) -> int:
    from ablate.run.commands import train_command

    return train_command(args)
