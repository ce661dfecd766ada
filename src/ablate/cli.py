"""`ablate` command line: train | sweep | status | table | archive | translate | evaluate | average | params.

Every command that takes a config reads `CONFIG [key=value ...]`: YAML files compose onto the
schema in order, then dotlist overrides (`model.heads=4 model.positional=learned`).
"""

from __future__ import annotations

import argparse
import sys

from ablate.archive import flags as archive_flags
from ablate.config import ConfigError
from ablate.data.datasets import DownloadError
from ablate.evaluation import flags as evaluation_flags
from ablate.messages import logs
from ablate.run import flags as run_flags
from ablate.sweep import flags as sweep_flags
from ablate.table import flags as table_flags
from ablate.training import flags as training_flags


def build_parser() -> argparse.ArgumentParser:
    """One subcommand per package, each adding its own flags (PACKAGE/flags.py), in the order `ablate -h` lists them."""
    parser = argparse.ArgumentParser(prog="ablate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for flags in (run_flags, sweep_flags, table_flags, archive_flags, evaluation_flags, training_flags):
        flags.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.to_stderr()
    try:
        return args.func(args)
    except (ConfigError, ValueError, OSError, DownloadError) as e:  # OSError's message names the path
        print(f"ablate {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
