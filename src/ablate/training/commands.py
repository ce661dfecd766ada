"""`ablate average`'s body (its flags: ablate.training.flags): the mean of a run's last K checkpoints, or of the ones
named, written where no input, link or other run's file would be replaced."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from ablate.files.destination import check_output, refuse_existing, run_of_checkpoint, stdout_is
from ablate.training.checkpoint import CheckpointError, average_checkpoints, save_atomic, step_checkpoints

log = logging.getLogger(__name__)


def average_cli(args: argparse.Namespace) -> int:
    paths = list(args.checkpoints)
    if args.run_dir:
        found = step_checkpoints(args.run_dir)[-args.last :]
        if 0 < len(found) < args.last:  # e.g. a run that kept fewer (train.keep_last) than the average asks for
            kept = "1 step checkpoint" if len(found) == 1 else f"{len(found)} step checkpoints"
            what = "the output holds its weights, nothing averaged" if len(found) == 1 else f"averaging those {len(found)}"
            log.warning("ablate average: --last %d, but %s/checkpoints holds %s: %s", args.last, args.run_dir, kept, what)
        paths += found
    if not paths:
        if not args.run_dir:
            raise CheckpointError(
                "nothing to average: name checkpoints, or a run with --run-dir RUN_DIR (its last --last step checkpoints)"
            )
        raise CheckpointError(f"no checkpoints given and none found under {args.run_dir}/checkpoints")
    out = Path(args.output)
    owns = [args.run_dir, *map(run_of_checkpoint, paths)]  # the run it averages: RUN/avg5.ckpt, as the docs show
    # an input, a link, another run, a record of the run (its summary.json, ...), or without --force a checkpoint it saved
    check_output(out, "--output", [("checkpoint", p) for p in paths], owns, override="--force", forced=args.force)
    # an existing file only with --force; over a run's last.ckpt too, which a resume then passes over (weights only)
    refuse_existing(out, "--output", args.force)
    save_atomic(average_checkpoints(paths), out, new_only=not args.force)
    report = sys.stderr if stdout_is(out) else sys.stdout  # `-o /dev/stdout > avg.ckpt`: never into the checkpoint
    print(f"averaged {len(paths)} checkpoint{'' if len(paths) == 1 else 's'} -> {out}", file=report)
    for p in paths:
        print(f"  {p}", file=report)
    return 0
