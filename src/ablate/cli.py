"""`ablate` command line: train | sweep | status | table | archive | translate | evaluate | average | params.

Every command that takes a config reads `CONFIG [key=value ...]`: YAML files compose onto the
schema in order, then dotlist overrides (`model.heads=4 model.positional=learned`).
"""

from __future__ import annotations

import argparse
import sys

from ablate.config import ConfigError
from ablate.config.validation import MAX_PARALLEL, SEED_MAX
from ablate.data.datasets import DownloadError
from ablate.messages import logs
from ablate.messages.flag_types import MAX_BOOT, Number


def _split_config_args(items: list[str]) -> tuple[list[str], list[str]]:
    files = [x for x in items if "=" not in x]
    overrides = [x for x in items if "=" in x]
    return files, overrides


def cmd_params(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ablate.experiment import load_config
    from ablate.model import build_transformer, count_parameters

    files, overrides = _split_config_args(args.config)
    cfg = load_config(files, overrides)
    counts = count_parameters(build_transformer(cfg.model, cfg.data.vocab_size))
    table = Table(title=f"parameters (shared vocabulary {cfg.data.vocab_size:,})")
    table.add_column("part")
    table.add_column("count", justify="right")
    table.add_column("x10^6", justify="right")
    for part in ("embeddings", "encoder", "decoder", "total"):
        table.add_row(part, f"{counts[part]:,}", f"{counts[part] / 1e6:.2f}")
    Console().print(table)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from ablate.experiment import load_config

    files, overrides = _split_config_args(args.config)
    cfg = load_config(files, overrides)
    from ablate.run.train import train  # Lightning takes seconds to import: a bad config is refused before it

    resume = args.resume
    if args.auto_resume:
        from pathlib import Path

        resume = any(Path(cfg.out_dir, "checkpoints").glob("*.ckpt"))  # a requeued job continues, a first one starts
    try:
        train(cfg, resume=resume, force=args.force, aside=args.move_aside, accept_data_change=args.accept_data_change)
    except FloatingPointError as e:  # the NaN guard (ablate.training.module): the run diverged; its message names the step
        raise ValueError(
            f"training diverged (FloatingPointError: {e}); a smaller train.lr_scale, or model.init_std, train.eps or "
            "train.weight_decay nearer their defaults, may train"
        ) from None
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    from ablate.evaluation.commands import translate_cli

    return translate_cli(args)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ablate.evaluation.commands import evaluate_cli

    return evaluate_cli(args)


def cmd_average(args: argparse.Namespace) -> int:
    from ablate.training.checkpoint import average_cli

    return average_cli(args)


def cmd_sweep(args: argparse.Namespace) -> int:
    from ablate.sweep.cli import sweep_cli

    return sweep_cli(args)


def cmd_status(args: argparse.Namespace) -> int:
    from ablate.sweep.status import status_cli

    return status_cli(args)


def cmd_table(args: argparse.Namespace) -> int:
    from ablate.table.cli import table_cli

    return table_cli(args)


def cmd_archive(args: argparse.Namespace) -> int:
    from ablate.archive.study import archive_cli

    return archive_cli(args)


SWEEP_EXITS = """exit codes:
  0    the study ran and has results; rows that failed by themselves are named on stderr with their logs
  1    every trial that ran failed: each row is named on stderr with its log (RUN_DIR/train.log)
  2    a usage or sweep file error; nothing started
  75   stopped by SIGTERM/SIGUSR1: running trials saved a checkpoint; run the same command to continue
  130  stopped by Ctrl-C, as for 75"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ablate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("params", help="print the parameter count of a config")
    p.add_argument("config", nargs="*", help="YAML files and key=value overrides")
    p.set_defaults(func=cmd_params)

    p = sub.add_parser("train", help="train one model")
    p.add_argument("config", nargs="*", help="YAML files and key=value overrides")
    p.add_argument("--resume", action="store_true", help="continue the run in out_dir from its last good checkpoint")
    p.add_argument("--auto-resume", action="store_true", help="resume when out_dir holds checkpoints, else start (for requeued jobs)")
    p.add_argument("--force", action="store_true", help="with --resume: accept a config that differs from the saved one")
    p.add_argument(
        "--accept-data-change",
        action="store_true",
        help="with --resume: go on although corpus files differ from the run's fingerprint (still with the run's own tokenizer)",
    )
    p.add_argument(
        "--move-aside", action="store_true", help="if out_dir holds an earlier run, move its files to OUT_DIR.earlier-K and start a new run"
    )
    p.set_defaults(func=cmd_train)

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
        help="trials at once (default: all GPU slots, else the file's workers)",
    )
    p.add_argument("--trials-per-gpu", default=None, help="trials sharing each GPU, N or auto (overrides the file's trials_per_gpu)")
    p.add_argument("--dry-run", action="store_true", help="print the trials and their differences from the base config")
    p.add_argument("--storage", help="Optuna RDB URL (default: SQLite under the sweep's out_dir; or $ABLATE_SWEEP_STORAGE)")
    p.add_argument("--n-trials", type=Number(int, 1), default=None, help="override the file's n_trials")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("status", help="what a sweep is doing or did: each trial's progress, the counts, the best row")
    p.add_argument("target", help="a sweep's out_dir, its sweep file, or a storage URL (sqlite:///, postgresql://, journal:///)")
    p.add_argument("--study", help="the study's name, when the storage holds several")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("table", help="a finished sweep in the paper's Table 3 layout, beside the paper's figures")
    p.add_argument("study", help="a sweep's out_dir (or its sweep file), or any folder of runs")
    p.add_argument("--wandb", action="store_true", help="read W&B offline run files under STUDY instead of run directories")
    p.add_argument(
        "--out",
        help="folder for NAME.{md,tex,csv,json,png} (default: ./tables/STUDY_NAME/, so a study's own folder, which may be "
        "committed evidence, is never written unless named here)",
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
    p.add_argument(
        "--plugins",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE_OR_MODULE",
        help="with --split test: plugins the runs' models need (their checkpoints only record them)",
    )
    p.set_defaults(func=cmd_table)

    p = sub.add_parser("archive", help="a study's evidence without checkpoints or corpus text, to commit, share or continue elsewhere")
    p.add_argument("study", help="a sweep's out_dir (or its sweep file)")
    p.add_argument("dest", help="the archive folder (created, or updated: nothing in it is removed)")
    p.add_argument(
        "--split",
        choices=["valid", "test"],
        help="first score every finished run without RUN/eval/SPLIT.json on SPLIT from its selected checkpoint",
    )
    p.add_argument("--device", default="auto", help="with --split: where to evaluate checkpoints (cpu, cuda, auto)")
    p.set_defaults(func=cmd_archive)

    decode = argparse.ArgumentParser(add_help=False)
    decode.add_argument("checkpoint", help="a .ckpt written by `ablate train` (or `ablate average`)")
    decode.add_argument("--beam", type=Number(int, 1), default=None, help="beam size (default: the run's train.beam_size; 1 = greedy)")
    decode.add_argument("--alpha", type=Number(float, 0), default=None, help="length penalty (default: the run's)")
    decode.add_argument("--batch-tokens", type=Number(int, 1), default=4000, help="source tokens per decoding batch")
    decode.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 or auto")
    decode.add_argument(
        "--plugins",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE_OR_MODULE",
        help="after the checkpoint: .py files or modules registering its own variants (a checkpoint only records its plugins)",
    )

    p = sub.add_parser("translate", parents=[decode], help="translate lines from stdin or a file")
    p.add_argument("--input", "-i", default="-", help="source file (plain or .gz); - = stdin")
    p.add_argument("--output", "-o", default="-", help="output file; - = stdout")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", parents=[decode], help="BLEU (with signature) and chrF of a checkpoint")
    p.add_argument("--split", default="test", choices=["valid", "test"], help="a split of the run's dataset")
    p.add_argument("--src", help="source file of another test set (plain or .gz)")
    p.add_argument("--ref", help="reference file aligned with --src")
    p.add_argument(
        "--longer-than",
        type=Number(int, 0),
        default=0,
        metavar="N",
        help="only pairs whose source has more than N subword tokens (length extrapolation)",
    )
    p.add_argument("--hyp-out", help="also write the hypotheses here")
    p.add_argument(
        "--save-eval",
        action="store_true",
        help="also write RUN_DIR/eval/SPLIT.json (hypotheses, per-sentence NLL) for `ablate table --split SPLIT`",
    )
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("average", help="average the weights of checkpoints (the paper averaged the last 5)")
    p.add_argument("checkpoints", nargs="*", help="checkpoint files; default: the last K of --run-dir")
    p.add_argument("--run-dir", help="a run's out_dir; averages its last --last checkpoints")
    p.add_argument("--last", type=Number(int, 1), default=5, help="with --run-dir: how many of its last step checkpoints (default: 5)")
    p.add_argument("--output", "-o", required=True, help="the averaged checkpoint to write (never over an existing file)")
    p.add_argument("--force", action="store_true", help="replace --output if it exists")
    p.set_defaults(func=cmd_average)
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
