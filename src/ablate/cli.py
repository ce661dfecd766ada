"""`ablate` command line: params | train | sweep | status | table | archive | translate | evaluate | average.

Every command that takes a config reads `CONFIG [key=value ...]`: YAML files compose onto the
schema in order, then dotlist overrides (`model.heads=4 model.positional=learned`).
"""

from __future__ import annotations

import argparse
import errno
import sys

from ablate import __version__, plugins
from ablate.archive import flags as archive_flags
from ablate.config import ConfigError
from ablate.data.datasets import DownloadError
from ablate.files import signals
from ablate.inference import flags as inference_flags
from ablate.messages import logs
from ablate.messages.hints import did_you_mean
from ablate.messages.redact import redact, redact_tracebacks
from ablate.run import flags as run_flags
from ablate.sweep import flags as sweep_flags
from ablate.table import flags as table_flags
from ablate.training import flags as training_flags

# Commands that stop on a signal in their own way (save, then 75 or 130; docs/runs.md), which Lightning's handler
# and the sweep's forwarding to its workers build on: SIGTERM is theirs.
OWN_SIGNAL_HANDLING = ("train", "sweep")


# One line each command's --help ends with: a command that works from the repository's root.
EXAMPLES = {
    "params": "ablate params experiments/base.yaml model.d_model=1024",
    "train": "ablate train experiments/quickstart.yaml model.heads=8 train.val_every_steps=60 train.keep_last=5 out_dir=runs/h8",
    "sweep": "ablate sweep sweeps/quickstart.yaml --dry-run",
    "status": "ablate status runs/sweeps/quickstart",
    "table": "ablate table runs/sweeps/quickstart --split test",
    "archive": "ablate archive runs/sweeps/quickstart studies/quickstart",
    "translate": "echo 'A dog runs on the beach.' | ablate translate runs/h8/checkpoints/best.ckpt",
    "evaluate": "ablate evaluate runs/h8/checkpoints/best.ckpt --split test",
    "average": "ablate average --run-dir runs/h8 --last 5 -o runs/h8/avg5.ckpt",
}

# The page each command's --help points to, after the example.
DOCS = {
    "params": "docs/configuration.md (configs and overrides)",
    "train": "docs/runs.md (outputs, resuming, stopping) and docs/configuration.md (every key)",
    "sweep": "docs/sweeps.md (the sweep file, storages, resuming), docs/members.md (--members)",
    "status": "docs/sweeps.md#watching",
    "table": "docs/table.md",
    "archive": "docs/sweeps.md#archiving-and-continuing-on-another-machine, docs/studies.md",
    "translate": "docs/runs.md#using-the-checkpoints",
    "evaluate": "docs/runs.md#using-the-checkpoints",
    "average": "docs/runs.md#using-the-checkpoints",
}


def build_parser() -> argparse.ArgumentParser:
    """One subcommand per package, each adding its own flags (PACKAGE/flags.py), in the order `ablate -h` lists them;
    each command's --help opens with what `ablate -h` says of it and ends with an example."""
    parser = argparse.ArgumentParser(prog="ablate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ablate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for flags in (run_flags, sweep_flags, table_flags, archive_flags, inference_flags, training_flags):
        flags.add_parsers(sub)
    for action in sub._choices_actions:  # argparse keeps each command's help= only for the list in `ablate -h`
        command = sub.choices[action.dest]
        command.description = command.description or action.help
        example = f"example: {EXAMPLES[action.dest]}\ndocs: {DOCS[action.dest]}"
        command.epilog = f"{command.epilog}\n\n{example}" if command.epilog else example
        command.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments; an unknown flag is refused by its command's parser (its usage, not ablate's), with the nearest
    flag it has or, for a command that reads a config, the override the flag may have meant (`--out_dir x` ->
    `out_dir=x`)."""
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    command = next((a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")), None)
    if command is not None and command not in sub.choices:  # argparse lists the choices, but guesses none
        parser.error(f"unknown command '{command}'{did_you_mean(command, list(sub.choices))}; the commands: {', '.join(sub.choices)}")
    args, extra = parser.parse_known_args(argv)
    if isinstance(getattr(args, "config", None), list):
        # Overrides and files after a flag (`--members 2 train.max_steps=30`, `--resume out_dir=x`) are the config's,
        # in their order, as Hydra and Lightning's CLI take them: argparse's positional list ends at the first flag.
        args.config += [a for a in extra if not a.startswith("-")]
        extra = [a for a in extra if a.startswith("-") and a != "--"]  # `--` ends the flags: nothing to refuse
    if not extra:
        return args
    command = sub.choices[args.command]
    flags = [o for a in command._actions for o in a.option_strings]
    named = []  # each argument once, with its hint beside it
    for arg in extra:
        name = arg.split("=", 1)[0]
        if not arg.startswith("-"):
            named.append(arg)
        elif near := did_you_mean(name, flags, cutoff=0.75):
            named.append(f"{arg}{near}")
        elif hasattr(args, "config") and ("." in name or name.lstrip("-") in ("out_dir", "seed", "seeds")):
            named.append(f"{arg} (config keys are overrides, written KEY=VALUE: {name.lstrip('-')}=...)")
        else:
            named.append(arg)
    command.error(f"unrecognized arguments: {' '.join(named)}")


def _rich_raises_on_a_broken_pipe() -> None:
    """rich's consoles exit 1 when stdout's reader goes away (Console.on_broken_pipe, the hook its docs offer to
    change that): they raise the BrokenPipeError instead, which main() ends quietly as it does a print's."""
    from rich.console import Console

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    Console.on_broken_pipe = on_broken_pipe


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parse(argv)
    except KeyboardInterrupt:  # before any command ran (ablate.__main__ says the same of the imports before this)
        print("ablate: stopped by Ctrl-C (SIGINT) while starting; nothing was written", file=sys.stderr)
        return signals.SIGINT_EXIT
    logs.to_stderr()
    redact_tracebacks()  # an error no command worded itself, raised on below, may quote a storage URL's password
    _rich_raises_on_a_broken_pipe()
    if args.command not in OWN_SIGNAL_HANDLING:
        signals.raise_on_sigterm()
    try:
        return args.func(args)
    except SystemExit:
        raise
    except BaseException as e:  # a signal first: a write it cut short may have raised another error as it unwound
        if signals.stdout_reader_gone(e):  # `| head` stopped reading: quiet, as a tool SIGPIPE killed (docs/runs.md)
            signals.quiet_stdout()
            return signals.SIGPIPE_EXIT
        if stopped := signals.exit_code(e):
            code, name = stopped
            print(f"ablate {args.command}: stopped by {name}; no file was left half-written or temporary", file=sys.stderr)
            return code
        if not isinstance(e, ConfigError) and (said := plugins.error_said(e)):  # the user's own code: where it failed
            print(f"ablate {args.command}: error: {said}", file=sys.stderr)
            return 1
        if isinstance(e, (ConfigError, ValueError, OSError, DownloadError)):  # OSError's message names the path
            print(f"ablate {args.command}: error: {redact(str(e))}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
