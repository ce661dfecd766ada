"""Translating text with a trained model and scoring it: `ablate translate` and `ablate evaluate`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ablate import plugins
from ablate.config import ConfigError, ExperimentConfig
from ablate.data.corpus import iter_lines, iter_stdin, read_lines, read_parallel
from ablate.data.tokenizer import Tokenizer
from ablate.evaluation.scores import bleu, chrf
from ablate.evaluation.search import beam_search
from ablate.files.atomic import write_file
from ablate.files.destination import check_output, run_of_checkpoint
from ablate.inference.stream import MAX_LINE_BYTES, to_stdout, translated_chunks
from ablate.model import Transformer, max_length
from ablate.model.tokens import EOS_ID, PAD_ID
from ablate.training.checkpoint import load_checkpoint, model_from_checkpoint, saved_config
from ablate.training.precision import Precision

log = logging.getLogger(__name__)


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@torch.no_grad()
def translate(
    model: Transformer,
    tokenizer: Tokenizer,
    lines: list[str],
    cfg: ExperimentConfig,
    beam: int | None = None,
    alpha: float | None = None,
    batch_tokens: int = 4000,
    progress: bool = False,
    source: str | None = None,
    first: int = 0,
) -> list[str]:
    """Beam-search translations of `lines`, in input order; batches are formed by source length. A line longer than
    the model takes (learned positions: model.max_positions) is translated from its first tokens, with a warning
    naming it (`source`:LINE, or its sentence number; `first`: how many lines of the source came before `lines`)
    rather than refused, so one long line never costs the rest."""
    if not lines:
        return []  # (SentencePiece decodes an empty batch to '', not to no sentences)
    t = cfg.train
    beam, alpha = beam or t.beam_size, t.length_penalty if alpha is None else alpha
    device = next(model.parameters()).device
    cap = max_length(cfg.model)
    max_src = None if cap is None else cap - 1  # room for EOS within the longest source the model takes
    encoded = tokenizer.encode(lines)
    if max_src is not None:
        _warn_truncated(encoded, max_src, cfg, source, first)
    encoded = [ids[:max_src] + [EOS_ID] for ids in encoded]
    outputs: list[list[int]] = [[] for _ in encoded]
    bar = Progress(
        TextColumn("translating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), disable=not progress, transient=True
    )
    with bar, Precision.of(t).decoding(device):  # the arithmetic the model trained and validated in
        task = bar.add_task("", total=len(encoded))
        for rows, src in length_batches(encoded, batch_tokens):
            hyps = beam_search(model, src.to(device), beam, alpha, t.max_len_a, t.max_len_b, cap)
            for i, h in zip(rows, hyps):
                outputs[i] = h
            bar.advance(task, len(rows))
    return tokenizer.decode(outputs)


def _warn_truncated(encoded: list[list[int]], max_src: int, cfg: ExperimentConfig, source: str | None, first: int, shown: int = 5) -> None:
    long = [i for i, ids in enumerate(encoded, first) if len(ids) > max_src]
    bound = f"model.max_positions={cfg.model.max_positions} with model.positional='{cfg.model.positional}' allows {max_src} source tokens and EOS"
    for i in long[:shown]:
        where = f"{source}:{i + 1}" if source else f"sentence {i + 1}"
        log.warning(
            "warning: %s has %s subword tokens; translated from its first %d only (%s)",
            where,
            f"{len(encoded[i - first]):,}",
            max_src,
            bound,
        )
    if len(long) > shown:
        log.warning("warning: %d more lines over %d subword tokens, each translated from its first %d", len(long) - shown, max_src, max_src)


def length_batches(encoded: list[list[int]], batch_tokens: int) -> Iterator[tuple[list[int], torch.Tensor]]:
    """Source rows sorted by length, cut into padded batches of at most `batch_tokens` (a longer row goes alone):
    (indices into `encoded`, (B, S) ids). Sorting keeps padding, and so wasted decoding work, small."""
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    start = 0
    while start < len(order):
        longest, end = 0, start
        while end < len(order) and (end == start or max(longest, len(encoded[order[end]])) * (end - start + 1) <= batch_tokens):
            longest = max(longest, len(encoded[order[end]]))
            end += 1
        rows = order[start:end]
        src = torch.full((len(rows), longest), PAD_ID, dtype=torch.long)
        for r, i in enumerate(rows):
            src[r, : len(encoded[i])] = torch.tensor(encoded[i])
        yield rows, src
        start = end


def longer_than(tokenizer: Tokenizer, srcs: list[str], refs: list[str], n: int) -> tuple[list[str], list[str]]:
    """The pairs whose source has more than `n` subword tokens: a length-extrapolation test set."""
    keep = [i for i, ids in enumerate(tokenizer.encode(srcs)) if len(ids) > n]
    return [srcs[i] for i in keep], [refs[i] for i in keep]


def score(hyps: list[str], refs: list[str]) -> dict:
    if not refs:
        raise ValueError("no sentences to score (the test set is empty)")
    b, c = bleu(hyps, refs), chrf(hyps, refs)
    return {
        "bleu": round(b.score, 2),
        "bleu_signature": b.signature,
        "chrf": round(c.score, 2),
        "chrf_signature": c.signature,
        "sentences": len(refs),
    }


def _load(args: argparse.Namespace):
    """The checkpoint's model on the chosen device, after importing the plugins given by `--plugins` (relative to the
    cwd); a checkpoint naming a variant that no plugin given registers is refused, naming the plugins it records."""
    plugins.load_plugins(getattr(args, "plugins", None) or [])
    saved = saved_config(load_checkpoint(args.checkpoint, mmap=True), args.checkpoint)
    problem = plugins.needed(f"checkpoint {args.checkpoint}", saved)
    if problem:
        raise ConfigError(problem)
    model, cfg, tokenizer = model_from_checkpoint(args.checkpoint)
    if args.beam is not None and args.beam > tokenizer.vocab_size:
        raise ValueError(f"--beam={args.beam} must be at most the vocabulary size of {args.checkpoint} ({tokenizer.vocab_size})")
    return model.to(pick_device(args.device)), cfg, tokenizer


def translate_cli(args: argparse.Namespace) -> int:
    if args.output != "-":  # before the model loads: -o mine.en beside -i mine.en is refused, naming both
        source = None if args.input == "-" else args.input
        inputs = [("--input", source), ("checkpoint", args.checkpoint)]
        check_output(args.output, "--output", inputs, owns=[run_of_checkpoint(args.checkpoint)])
    model, cfg, tokenizer = _load(args)
    cap = MAX_LINE_BYTES
    lines, source = (iter_stdin(cap), "stdin") if args.input == "-" else (iter_lines(args.input, cap), args.input)
    a, progress = args, sys.stderr.isatty()
    text = translated_chunks(
        lines, lambda chunk, first: translate(model, tokenizer, chunk, cfg, a.beam, a.alpha, a.batch_tokens, progress, source, first)
    )
    if args.output == "-":
        return to_stdout(text)  # each chunk as it is translated (ablate.inference.stream)
    write_file(args.output, text)
    return 0


def save_record(
    checkpoint: Path,
    model: Transformer,
    cfg: ExperimentConfig,
    tokenizer: Tokenizer,
    split: str,
    pairs: list[tuple[str, str]],
    hyps: list[str],
) -> Path:
    """Write RUN_DIR/eval/SPLIT.json for a checkpoint in RUN_DIR/checkpoints/: its hypotheses and each reference's
    teacher-forced NLL, the record `ablate table` tests rows with (ablate.evaluation.records)."""
    from ablate.data.batching import encode_pairs
    from ablate.evaluation.records import write_eval_file
    from ablate.evaluation.sentence_scores import split_nll

    if checkpoint.parent.name != "checkpoints":
        raise ValueError(f"--save-eval: {checkpoint} is not in a run directory's checkpoints/ folder, so there is no run to save it in")
    device = next(model.parameters()).device
    with Precision.of(cfg.train).decoding(device):
        nll, tokens = split_nll(model, encode_pairs(tokenizer, pairs, cfg.data.max_len, "truncate"), device)
    return write_eval_file(
        checkpoint.parent.parent,
        split,
        dataset=cfg.data.dataset,
        checkpoint=checkpoint.name,
        indices=range(len(pairs)),
        hypotheses=hyps,
        references=[r for _, r in pairs],
        nll=nll,
        tokens=tokens,
    )


def evaluate_cli(args: argparse.Namespace) -> int:
    if bool(args.src) != bool(args.ref):
        raise ValueError("--src and --ref go together (a source file and its aligned reference)")
    if args.save_eval and (args.src or args.longer_than):
        raise ValueError("--save-eval records a whole split of the run's dataset (--split), not --src/--ref or --longer-than")
    if args.hyp_out:
        inputs = [("--src", args.src), ("--ref", args.ref), ("checkpoint", args.checkpoint)]
        check_output(args.hyp_out, "--hyp-out", inputs, owns=[run_of_checkpoint(args.checkpoint)])
    model, cfg, tokenizer = _load(args)
    if args.src:
        # Keep every line (empty ones too) so the hypotheses stay aligned with the references.
        srcs, refs = read_lines(args.src), read_lines(args.ref)
        if len(srcs) != len(refs):
            raise ValueError(f"{args.src} has {len(srcs)} lines but {args.ref} has {len(refs)}")
        name = f"{args.src}"
    else:
        from ablate.data.datasets import resolve_split

        split = "valid" if args.split == "valid" else "test"
        pairs, _ = read_parallel(*resolve_split(cfg.data, split))
        srcs, refs = [s for s, _ in pairs], [r for _, r in pairs]
        name = f"{cfg.data.dataset}:{split}"
    if args.longer_than:
        srcs, refs = longer_than(tokenizer, srcs, refs, args.longer_than)
        name += f" (sources > {args.longer_than} tokens)"
        if not srcs:
            raise ValueError(f"no sentence of {name} has more than {args.longer_than} source tokens")
    lines_of = args.src if args.src and not args.longer_than else None  # sentence i is line i of --src: name it so
    hyps = translate(model, tokenizer, srcs, cfg, args.beam, args.alpha, args.batch_tokens, progress=sys.stderr.isatty(), source=lines_of)
    if args.hyp_out:
        write_file(args.hyp_out, "".join(h + "\n" for h in hyps))
    result = {"checkpoint": str(args.checkpoint), "test_set": name, "beam": args.beam or cfg.train.beam_size, **score(hyps, refs)}
    if args.save_eval:
        result["record"] = str(save_record(Path(args.checkpoint), model, cfg, tokenizer, split, pairs, hyps))
    print(json.dumps(result, indent=2))
    return 0
