"""Scoring a run's selected checkpoint on a split it saved no evaluation record for (`ablate table --split test`):
beam-search translations (`ablate.inference.translation.translate`) and each reference's teacher-forced NLL, written as
RUN_DIR/eval/{split}.json (`ablate.evaluation.records`). The checkpoint is the one chosen on validation, never by test."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ablate import plugins
from ablate.config.saved import read_run_config
from ablate.evaluation.records import AVERAGED, FINAL, EvalFile, read_eval_file
from ablate.files.json_file import object_or_empty
from ablate.table.finished_runs import Run

UNRECORDED = ("avg.ckpt", "best.ckpt")  # a run that recorded no selection (older runs): the average, else the best


def _selection(run_dir: Path) -> tuple[str, int | None]:
    """The summary's `selected` ("" if unrecorded) and its trained steps."""
    summary = object_or_empty(run_dir / "summary.json")
    return str(summary.get("selected", "")), summary.get("steps")


def selected_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint holding the weights the run reported on validation (its summary's `selected`), so a test score
    is of the same weights: avg.ckpt for "avg of last K", last.ckpt for "final weights" when it was saved at the
    run's last step (else no file holds them). None when the file is missing; a CheckpointError naming last.ckpt
    when it cannot be read, not taken for one saved at another step."""
    ckpts = run_dir / "checkpoints"
    selected, steps = _selection(run_dir)
    if selected.startswith("avg"):
        return ckpts / AVERAGED if (ckpts / AVERAGED).is_file() else None
    if selected == FINAL:
        last = ckpts / "last.ckpt"
        return last if last.is_file() and _step(last) == steps else None
    return next((ckpts / n for n in UNRECORDED if (ckpts / n).is_file()), None)


def _step(path: Path) -> int | None:
    from ablate.training.checkpoint import load_checkpoint

    return load_checkpoint(path, mmap=True).get("global_step")  # memory-mapped: only the few bytes of global_step are read


def wanted_checkpoint(run_dir: Path) -> str:
    """What `selected_checkpoint` looks for in `run_dir`, for messages."""
    selected, _ = _selection(run_dir)
    if selected.startswith("avg"):
        return f"checkpoints/{AVERAGED} (the run reported the {selected})"
    if selected == FINAL:
        return "checkpoints/last.ckpt saved at the run's last step (the run reported its final weights)"
    return f"checkpoints/{' or '.join(UNRECORDED)}"


def refuse_unscorable(run_dirs: Iterable[Path], split: str, rows: dict[Path, str] | None = None, device: str = "auto") -> None:
    """Refuse, before the first of the evaluations (minutes each), every run among `run_dirs` that could not be scored:
    one without the checkpoint it selected, or whose model names a variant no imported plugin registers (`--plugins`),
    so a study is not half scored when the last run fails; and a `device` this machine lacks. `rows` names each run's
    row in the message."""
    run_dirs = list(run_dirs)
    if run_dirs:
        from ablate.inference.translation import pick_device

        pick_device(device)
    problems, lacking = [], False
    for run in run_dirs:
        who = f"run '{rows[run]}' at {run}" if rows and run in rows else str(run)
        try:
            selected = selected_checkpoint(run)
        except ValueError as e:  # its last.ckpt unreadable (a CheckpointError naming it)
            problems.append(f"{who}: {e}")
            continue
        if selected is None:
            problems.append(f"{who}: no eval/{split}.json and no {wanted_checkpoint(run)} to make one from")
            lacking = True
        elif why := plugins.needed(who, read_run_config(run / "config.yaml")):
            problems.append(why)
    if problems:
        more = f"; and {len(problems) - 3} more runs" if len(problems) > 3 else ""
        hint = f"; a record can be written with `ablate evaluate CHECKPOINT --split {split} --save-eval`" if lacking else ""
        runs = "a run cannot" if len(problems) == 1 else f"{len(problems)} runs cannot"
        raise ValueError(f"{runs} be scored on the {split} split, so none was: " + "; ".join(problems[:3]) + more + hint)


def evaluate_run(run_dir: Path, split: str, device: str = "auto") -> Path:
    """Translate and score the run's selected checkpoint on all of `split`; write and return RUN_DIR/eval/{split}.json."""
    from ablate.data.corpus import read_parallel
    from ablate.data.datasets import resolve_split
    from ablate.inference.translation import pick_device, save_record, translate
    from ablate.training.checkpoint import model_from_checkpoint

    ckpt = selected_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{run_dir}: no {wanted_checkpoint(run_dir)} to evaluate")
    model, cfg, tokenizer = model_from_checkpoint(ckpt)
    model = model.to(pick_device(device))
    pairs, _ = read_parallel(*resolve_split(cfg.data, split))
    return save_record(ckpt, model, cfg, tokenizer, split, pairs, translate(model, tokenizer, [s for s, _ in pairs], cfg))


def evaluator(split: str, device: str = "auto"):
    """The callback `sentence_records.collect` calls for a run without a record: evaluate it, or say why it cannot."""

    def evaluate(run: Run) -> EvalFile:
        if run.run_dir is None or selected_checkpoint(run.run_dir) is None:
            where = "its summary has no eval/" + split if run.run_dir is None else f"it has no eval/{split}.json"
            raise ValueError(
                f"run '{run.row}' at {run.source}: {where} and no "
                + ("checkpoint" if run.run_dir is None else wanted_checkpoint(run.run_dir))
                + f" to evaluate; write one with `ablate evaluate CHECKPOINT --split {split} --save-eval`"
            )
        print(f"evaluating {selected_checkpoint(run.run_dir)} on the {split} split ...")
        return read_eval_file(evaluate_run(run.run_dir, split, device), split)

    return evaluate
