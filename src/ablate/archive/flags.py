"""`ablate archive`: its flags; the command is ablate.archive.commands."""

from __future__ import annotations

import argparse

from ablate.messages.flag_types import add_plugins_flag


def add_parsers(sub) -> None:
    p = sub.add_parser("archive", help="a study's evidence without checkpoints or corpus text, to commit, share or continue elsewhere")
    p.add_argument("study", help="a sweep's out_dir (or its sweep file)")
    p.add_argument("dest", help="the archive folder (created, or updated: nothing in it is removed)")
    p.add_argument(
        "--split",
        choices=["valid", "test"],
        help="first score every finished run without RUN/eval/SPLIT.json on SPLIT from its selected checkpoint",
    )
    p.add_argument("--device", default="auto", help="with --split: where to evaluate checkpoints (cpu, cuda, auto)")
    add_plugins_flag(p, "with --split: the plugins the runs' models need (their checkpoints only record them)")
    p.set_defaults(func=run_archive)


def run_archive(args: argparse.Namespace) -> int:
    from ablate.archive.commands import archive_command

    return archive_command(args)
