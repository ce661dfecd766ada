"""`ablate translate` and `ablate evaluate`: their flags, the decoding ones shared; the commands (evaluation.commands)
import torch."""

from __future__ import annotations

import argparse

from ablate.messages.flag_types import Number, add_plugins_flag


def add_parsers(sub) -> None:
    decode = argparse.ArgumentParser(add_help=False)
    decode.add_argument("checkpoint", help="a .ckpt written by `ablate train` (or `ablate average`)")
    decode.add_argument("--beam", type=Number(int, 1), default=None, help="beam size (default: the run's train.beam_size; 1 = greedy)")
    decode.add_argument("--alpha", type=Number(float, 0), default=None, help="length penalty (default: the run's)")
    decode.add_argument(
        "--batch-tokens", type=Number(int, 1), default=4000, metavar="N", help="source tokens per decoding batch (default: 4000)"
    )
    decode.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 or auto (default: auto, a GPU if there is one)")
    add_plugins_flag(
        decode, "after the checkpoint: .py files or modules registering its own variants (a checkpoint only records its plugins)"
    )

    p = sub.add_parser("translate", parents=[decode], help="translate lines from stdin or a file")
    p.add_argument("--input", "-i", default="-", help="source file (plain or .gz); - = stdin")
    p.add_argument("--output", "-o", default="-", help="output file; - = stdout")
    p.add_argument("--force", action="store_true", help="write over an --output that already exists")
    p.set_defaults(func=run_translate)

    p = sub.add_parser("evaluate", parents=[decode], help="BLEU (with signature) and chrF of a checkpoint")
    p.add_argument("--split", default="test", choices=["valid", "test"], help="a split of the run's dataset (default: test)")
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
    p.add_argument("--force", action="store_true", help="write over a --hyp-out, or the run's eval/SPLIT.json (--save-eval), already there")
    p.add_argument(
        "--save-eval",
        action="store_true",
        help="also write RUN_DIR/eval/SPLIT.json (hypotheses, per-sentence NLL) for `ablate table --split SPLIT`",
    )
    p.set_defaults(func=run_evaluate)


def run_translate(args: argparse.Namespace) -> int:
    from ablate.inference.commands import translate_cli

    return translate_cli(args)


def run_evaluate(args: argparse.Namespace) -> int:
    from ablate.inference.commands import evaluate_cli

    return evaluate_cli(args)
