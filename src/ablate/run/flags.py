"""`ablate params` and `ablate train`: their flags, and their entries, which import torch and Lightning only once
the config has loaded (a bad config is refused in a fraction of a second)."""

from __future__ import annotations

import argparse


def add_parsers(sub) -> None:
    p = sub.add_parser("params", help="print the parameter count of a config")
    p.add_argument("config", nargs="*", help="YAML files and key=value overrides")
    p.set_defaults(func=run_params)

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
    p.set_defaults(func=run_train)


def split_config_args(items: list[str]) -> tuple[list[str], list[str]]:
    """`CONFIG [key=value ...]`: the YAML files, then the dotlist overrides."""
    return [x for x in items if "=" not in x], [x for x in items if "=" in x]


def run_params(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ablate.experiment import load_config
    from ablate.run.memory import parameter_count

    cfg = load_config(*split_config_args(args.config))
    counts = parameter_count(cfg)  # on the meta device: any size is counted, none allocated
    table = Table(title=f"parameters (shared vocabulary {cfg.data.vocab_size:,})")
    table.add_column("part")
    table.add_column("count", justify="right")
    table.add_column("x10^6", justify="right")
    for part in ("embeddings", "encoder", "decoder", "total"):
        table.add_row(part, f"{counts[part]:,}", f"{counts[part] / 1e6:.2f}")
    Console().print(table)
    return 0


def run_train(args: argparse.Namespace) -> int:
    from ablate.experiment import load_config

    cfg = load_config(*split_config_args(args.config))
    from ablate.run.train import train  # Lightning takes seconds to import: a bad config is refused before it

    resume = args.resume
    if args.auto_resume:
        from pathlib import Path

        resume = any(Path(cfg.out_dir, "checkpoints").glob("*.ckpt"))  # a requeued job continues, a first one starts
    try:
        summary = train(cfg, resume=resume, force=args.force, aside=args.move_aside, accept_data_change=args.accept_data_change)
    except FloatingPointError as e:  # the NaN guard (ablate.training.module): the run diverged; its message names the step
        raise ValueError(
            f"training diverged (FloatingPointError: {e}); a smaller train.lr_scale, or model.init_std, train.eps or "
            "train.weight_decay nearer their defaults, may train"
        ) from None
    from ablate.run.closing import print_closing

    print_closing(summary)  # final scores and where the files are
    return 0
