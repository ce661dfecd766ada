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
from ablate.files import signals
from ablate.inference import flags as inference_flags
from ablate.messages import logs
from ablate.run import flags as run_flags
from ablate.sweep import flags as sweep_flags
from ablate.table import flags as table_flags
from ablate.training import flags as training_flags

# Commands that stop on a signal in their own way (save, then 75 or 130; docs/runs.md), which Lightning's handler
# and the sweep's forwarding to its workers build on: SIGTERM is theirs.
OWN_SIGNAL_HANDLING = ("train", "sweep")


def build_parser() -> argparse.ArgumentParser:
    """One subcommand per package, each adding its own flags (PACKAGE/flags.py), in the order `ablate -h` lists them."""
    parser = argparse.ArgumentParser(prog="ablate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for flags in (run_flags, sweep_flags, table_flags, archive_flags, inference_flags, training_flags):
        flags.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.to_stderr()
    if args.command not in OWN_SIGNAL_HANDLING:
        signals.raise_on_sigterm()
    try:
        return args.func(args)
    except SystemExit:
        raise
    except BaseException as e:  # a signal first: a write it cut short may have raised another error as it unwound
        if stopped := signals.exit_code(e):
            code, name = stopped
            print(f"ablate {args.command}: stopped by {name}; no file was left half-written or temporary", file=sys.stderr)
            return code
        if isinstance(e, (ConfigError, ValueError, OSError, DownloadError)):  # OSError's message names the path
            print(f"ablate {args.command}: error: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
