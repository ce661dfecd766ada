"""Scoring a run's selected checkpoint on a split it saved no evaluation record for (`ablate table --split test`):
beam-search translations (`ablate.evaluate.translate`) and each reference's teacher-forced NLL, written as
RUN_DIR/eval/{split}.json (`ablate.eval_file`). The checkpoint is the one chosen on validation, never by test."""

from __future__ import annotations

from pathlib import Path

from ablate.eval_file import EvalFile, read_eval_file
from ablate.sentence_scores import sentence_nll, split_nll
from ablate.table.load import Run

# The per-sentence NLL helpers live in ablate.sentence_scores (training writes records too); re-exported here.
__all__ = ["evaluate_run", "evaluator", "selected_checkpoint", "sentence_nll", "split_nll"]

CHECKPOINTS = ("avg.ckpt", "best.ckpt")  # preferred first: the averaged last checkpoints, else the best on validation


def selected_checkpoint(run_dir: Path) -> Path | None:
    return next((run_dir / "checkpoints" / n for n in CHECKPOINTS if (run_dir / "checkpoints" / n).is_file()), None)


def evaluate_run(run_dir: Path, split: str, device: str = "auto") -> Path:
    """Translate and score the run's selected checkpoint on all of `split`; write and return RUN_DIR/eval/{split}.json."""
    from ablate.checkpoint import model_from_checkpoint
    from ablate.corpus import read_parallel
    from ablate.datasets import resolve_split
    from ablate.evaluate import pick_device, save_record, translate

    ckpt = selected_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoints/{' or '.join(CHECKPOINTS)} to evaluate")
    model, cfg, tokenizer = model_from_checkpoint(ckpt)
    model = model.to(pick_device(device))
    pairs, _ = read_parallel(*resolve_split(cfg.data, split))
    return save_record(ckpt, model, cfg, tokenizer, split, pairs, translate(model, tokenizer, [s for s, _ in pairs], cfg))


def evaluator(split: str, device: str = "auto"):
    """The callback `significance.collect` calls for a run without a record: evaluate it, or say why it cannot."""

    def evaluate(run: Run) -> EvalFile:
        if run.run_dir is None or selected_checkpoint(run.run_dir) is None:
            where = "its summary has no eval/" + split if run.run_dir is None else f"it has no eval/{split}.json"
            raise ValueError(
                f"run '{run.row}' at {run.source}: {where} and no checkpoints/{' or '.join(CHECKPOINTS)} "
                f"to evaluate; write one with `ablate evaluate CHECKPOINT --split {split} --save-eval`"
            )
        print(f"evaluating {selected_checkpoint(run.run_dir)} on the {split} split ...")
        return read_eval_file(evaluate_run(run.run_dir, split, device), split)

    return evaluate
