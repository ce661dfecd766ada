"""Scoring a run's selected checkpoint on a split it saved no evaluation record for (`ablate table --split test`):
beam-search translations (`ablate.evaluate.translate`) and each reference's teacher-forced NLL, written as
RUN_DIR/eval/{split}.json (`ablate.eval_file`). The checkpoint is the one chosen on validation, never by test."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from ablate.eval_file import EvalFile, read_eval_file, write_eval_file
from ablate.table.load import Run
from ablate.tokens import PAD_ID

CHECKPOINTS = ("avg.ckpt", "best.ckpt")  # preferred first: the averaged last checkpoints, else the best on validation
BATCH_SENTENCES = 64


def selected_checkpoint(run_dir: Path) -> Path | None:
    return next((run_dir / "checkpoints" / n for n in CHECKPOINTS if (run_dir / "checkpoints" / n).is_file()), None)


@torch.no_grad()
def sentence_nll(model, batch: dict) -> tuple[Tensor, Tensor]:
    """Each sentence's summed NLL (nats) of its reference, teacher-forced, without label smoothing, and its number
    of target tokens (EOS included): (B,) and (B,). Sums to `ablate.loss.translation_loss`'s NLL over the batch."""
    logits = model(batch["src"], batch["tgt_in"])  # (B, T, V)
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    keep = batch["tgt_out"] != PAD_ID  # (B, T)
    nll = -logp.gather(-1, batch["tgt_out"].unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (nll * keep).sum(dim=1), keep.sum(dim=1)


def split_nll(model, encoded, device: torch.device) -> tuple[list[float], list[int]]:
    """`sentence_nll` of every pair of an `EncodedSplit`, in its order; batches of similar length."""
    from ablate.batching import collate

    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][2]))
    nll, tokens = [0.0] * len(encoded), [0] * len(encoded)
    for start in range(0, len(order), BATCH_SENTENCES):
        rows = order[start : start + BATCH_SENTENCES]
        batch = collate([encoded[i] for i in rows])
        s, n = sentence_nll(model, {k: batch[k].to(device) for k in ("src", "tgt_in", "tgt_out")})
        for i, a, b in zip(rows, s.tolist(), n.tolist()):
            nll[i], tokens[i] = a, int(b)
    return nll, tokens


def evaluate_run(run_dir: Path, split: str, device: str = "auto") -> Path:
    """Translate and score the run's selected checkpoint on all of `split`; write and return RUN_DIR/eval/{split}.json."""
    from ablate.batching import encode_pairs
    from ablate.checkpoint import model_from_checkpoint
    from ablate.corpus import read_parallel
    from ablate.datasets import resolve_split
    from ablate.evaluate import pick_device, translate

    ckpt = selected_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoints/{' or '.join(CHECKPOINTS)} to evaluate")
    model, cfg, tokenizer = model_from_checkpoint(ckpt)
    dev = pick_device(device)
    model = model.to(dev)
    pairs, _ = read_parallel(*resolve_split(cfg.data, split))
    srcs, refs = [s for s, _ in pairs], [t for _, t in pairs]
    hyps = translate(model, tokenizer, srcs, cfg)
    nll, tokens = split_nll(model, encode_pairs(tokenizer, pairs, cfg.data.max_len, "truncate"), dev)
    return write_eval_file(run_dir, split, dataset=cfg.data.dataset, checkpoint=ckpt.name, indices=range(len(pairs)),
                           hypotheses=hyps, references=refs, nll=nll, tokens=tokens)


def evaluator(split: str, device: str = "auto"):
    """The callback `significance.collect` calls for a run without a record: evaluate it, or say why it cannot."""

    def evaluate(run: Run) -> EvalFile:
        if run.run_dir is None or selected_checkpoint(run.run_dir) is None:
            where = "its summary has no eval/" + split if run.run_dir is None else f"it has no eval/{split}.json"
            raise ValueError(f"run '{run.row}' at {run.source}: {where} and no checkpoints/{' or '.join(CHECKPOINTS)} "
                             f"to evaluate; write one with `ablate evaluate CHECKPOINT --split {split} --save-eval`")
        print(f"evaluating {selected_checkpoint(run.run_dir)} on the {split} split ...")
        return read_eval_file(evaluate_run(run.run_dir, split, device), split)

    return evaluate
