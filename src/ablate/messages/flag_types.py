"""Argparse types for ablate's numeric flags: a value out of range is a usage error naming the flag, as argparse words
it ("argument --beam: 0 must be an integer >= 1"), so no bad number reaches a command."""

from __future__ import annotations

import argparse
import glob
import math
import os

MAX_BOOT = 1_000_000  # bootstrap resamples: past this the paired tests take hours and say nothing more


class Number:
    """An argparse type for a numeric flag: a finite `kind` from `low` to `high` (None: no bound); argparse names the
    flag in the error ("argument --beam: 0 must be an integer >= 1"), so no bad value reaches the command."""

    def __init__(self, kind: type, low: float, high: float | None = None):
        self.kind, self.low, self.high = kind, low, high
        self.__name__ = kind.__name__

    def __call__(self, text: str) -> int | float:
        what = "an integer" if self.kind is int else "a number"
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value) or value < self.low or (self.high is not None and value > self.high):
            bounds = f">= {self.low}" if self.high is None else f"from {self.low} to {self.high}"
            raise argparse.ArgumentTypeError(f"{text} must be {what} {bounds}")
        return value


class _Plugins(argparse._ExtendAction):
    """`--plugins` takes every value after it, so given before a positional it swallows that too: a value that cannot
    be a plugin (a checkpoint, a folder, a path that is no .py file) is refused naming it, rather than argparse
    saying the positional is missing."""

    def __call__(self, parser, namespace, values, option_string=None):
        for value in values:
            folder = os.path.isdir(value) and not glob.glob(os.path.join(glob.escape(value), "*.py"))  # no package's
            if value.endswith(".ckpt") or folder or ("/" in value and not value.endswith(".py")):
                raise argparse.ArgumentError(
                    self,
                    f"{value} is not a plugin (a .py file or a module name): --plugins takes every value after it, so give it after the command's other arguments",
                )
        super().__call__(parser, namespace, values, option_string)


def add_plugins_flag(parser: argparse.ArgumentParser, help: str) -> None:
    """The `--plugins FILE_OR_MODULE ...` flag of the commands that rebuild a saved model (a checkpoint only records its plugins)."""
    parser.add_argument("--plugins", nargs="+", action=_Plugins, default=[], metavar="FILE_OR_MODULE", help=help)
