"""Translating with a trained model, and recording how it scored: the library under `ablate translate` and `ablate
evaluate` (ablate.inference.commands) that a run's end (ablate.run.evaluation) and `ablate table`'s test-split scoring
(ablate.table.checkpoint_scoring) share."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ablate.config import ExperimentConfig
from ablate.data.tokenizer import Tokenizer
from ablate.evaluation.search import beam_search
from ablate.model import Transformer, max_length
from ablate.model.tokens import EOS_ID, PAD_ID
from ablate.training.precision import Precision

log = logging.getLogger(__name__)


def pick_device(name: str = "auto") -> torch.device:
    """`--device`: auto (a GPU if there is one), cpu, cuda or cuda:N; one this machine lacks is refused, naming it."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    others = [kind for kind in ("mps", "xpu") if _available(kind)]  # Apple's and Intel's GPUs, where torch has them
    try:
        device = torch.device(name)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda", *others) or (device.type == "cuda" and (device.index or 0) >= gpus):
        have = ", ".join(["auto", "cpu", *(["cuda", *(f"cuda:{i}" for i in range(gpus))] if gpus else []), *others])
        raise ValueError(f"--device {name}: no such device here (this machine has: {have})")
    return device


def _available(kind: str) -> bool:
    backend = getattr(torch.backends, kind, None) if kind == "mps" else getattr(torch, kind, None)
    try:
        return bool(backend is not None and backend.is_available())
    except (AttributeError, RuntimeError):
        return False


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
    # On stderr, as ablate's other lines, and shown only with `progress`: on stdout's console rich 15 wrote a blank line
    # into the translations where stderr is a terminal (each then a line below its source), and rich < 14.3 one at each
    # chunk's end even when disabled.
    columns = (TextColumn("translating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    bar = Progress(*columns, console=Console(stderr=True), disable=not progress, transient=True)
    with bar if progress else contextlib.nullcontext(), Precision.of(t).decoding(device):  # the run's own arithmetic
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
    from ablate.evaluation.scores import bleu_tokenizer
    from ablate.evaluation.sentence_scores import split_nll

    if checkpoint.parent.name != "checkpoints":
        raise ValueError(f"--save-eval: {checkpoint} is not in a run directory's checkpoints/ folder, so there is no run to save it in")
    device = next(model.parameters()).device
    with Precision.of(cfg.train).decoding(device):
        nll, tokens = split_nll(model, encode_pairs(tokenizer, pairs, cfg.data.max_len, "truncate", max_length(cfg.model)), device)
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
        tokenize=bleu_tokenizer(cfg.data.tgt_lang),
    )
