"""The runs' evaluation records (`ablate.evaluation.records`) read and aligned for `ablate table`: each run's record (its
run directory's, or its W&B summary's), the sentences every record scored, one BLEU for all, and each run's corpus BLEU
and PPL set to its scores on those sentences, with what they are on (`Evidence`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ablate.evaluation.records import EvalFile, EvalFileError, eval_path, parse_eval, read_eval_file
from ablate.table import corpus_scores
from ablate.table.finished_runs import Run


@dataclass
class Evidence:
    """What a study's evaluation records say: the split, the sentences scored, the checkpoints, and remarks."""

    split: str
    dataset: str | None = None
    sentences: int | None = None  # sentences every run with a record was scored on
    subset: str | None = None
    checkpoints: list[str] = field(default_factory=list)
    runs_with_records: int = 0
    bleu_signature: str | None = None  # sacreBLEU's, of the BLEU the table shows
    runs: int = 0
    notes: list[str] = field(default_factory=list)
    per_run: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # run.source -> {"bleu": (n, 10), "ppl": (n, 2)}
    skipped: dict[str, str] = field(default_factory=dict)  # runs left out -> why (`finished_runs.runs_from_wandb`, `left_out`)
    skipped_what: str = "W&B run"  # what those are, as the note names them
    diverged: dict[str, tuple[str, dict]] = field(default_factory=dict)  # row none of whose runs finished -> (why, config)
    some_diverged: dict[str, list] = field(default_factory=dict)  # row scored on the seeds that finished -> those that diverged


def _record(run: Run, split: str) -> EvalFile | None:
    """The run's record: RUN_DIR/eval/{split}.json, else its summary's `eval/{split}` (how W&B runs carry it)."""
    if run.run_dir is not None and eval_path(run.run_dir, split).exists():
        return read_eval_file(eval_path(run.run_dir, split), split)
    nested = run.summary.get("eval")
    data = run.summary.get(f"eval/{split}", nested.get(split) if isinstance(nested, dict) else None)
    return None if data is None else parse_eval(data, f"{run.source} (summary key eval/{split})", split)


def unrecorded(runs: list[Run], split: str) -> list[Run]:
    """The runs without a record on `split` (as `_record` looks for one, unread): those `collect` has `evaluate` score."""

    def in_summary(run: Run) -> bool:
        nested = run.summary.get("eval")
        return f"eval/{split}" in run.summary or (isinstance(nested, dict) and split in nested)

    return [r for r in runs if not (r.run_dir is not None and eval_path(r.run_dir, split).exists()) and not in_summary(r)]


def collect(runs: list[Run], split: str, evaluate: Callable[[Run], EvalFile] | None = None) -> Evidence:
    """Read every run's record, align them on common sentences and set each run's `bleu`/`ppl` to its scores there.

    A run without a record keeps its summary's scores, or with `evaluate` (the test split) gets one made for it.
    """
    records: dict[str, EvalFile] = {}
    for run in runs:
        rec = _record(run, split)
        if rec is None and evaluate is not None:
            rec = evaluate(run)
        if rec is not None:
            records[run.source] = rec
    ev = Evidence(split, runs=len(runs), runs_with_records=len(records))
    if not records:  # the summaries' BLEU, with the signatures they were scored with
        ev.bleu_signature = "; ".join(sorted({str(r.summary["bleu_signature"]) for r in runs if r.summary.get("bleu_signature")})) or None
        return ev
    bleu = {source: np.asarray(rec.sentence_bleu_stats(), dtype=np.int64).reshape(len(rec.indices), -1) for source, rec in records.items()}
    # Re-scored here from text with this sacreBLEU; a text-free record's statistics keep the signature they were made with.
    signatures = {
        s: corpus_scores.bleu_signature(r.tokenizer) if r.hypotheses is not None else r.bleu_signature for s, r in records.items()
    }
    _check_same_bleu(signatures)
    ev.bleu_signature = "; ".join(sorted(set(signatures.values())))
    common = _common_indices(records, bleu, ev)
    for run in runs:
        rec = records.get(run.source)
        if rec is None:
            continue
        keep = [i for i, idx in enumerate(rec.indices) if idx in common]
        ev.per_run[run.source] = {
            "bleu": bleu[run.source][keep],
            "ppl": corpus_scores.ppl_stats([rec.nll[i] for i in keep], [rec.tokens[i] for i in keep]),
        }
        run.bleu, run.ppl = (
            corpus_scores.corpus_bleu(ev.per_run[run.source]["bleu"]),
            corpus_scores.corpus_ppl(ev.per_run[run.source]["ppl"]),
        )
    first = next(iter(records.values()))
    ev.dataset, ev.sentences = first.dataset, len(common)
    subsets = {r.subset for r in records.values()}
    aligned = len(subsets) == 1 and all(len(r.indices) == len(common) for r in records.values())
    ev.subset = next(iter(subsets)) if aligned else f"the {len(common)} sentences common to all runs"
    ev.checkpoints = sorted({r.checkpoint for r in records.values()})
    return ev


def _check_same_bleu(signatures: dict[str, str]) -> None:
    """Statistics of one BLEU only: a record scored with another tokeniser, casing or smoothing would compare as if
    the systems differed. sacreBLEU's version alone may differ (its statistics do not change with it)."""

    def metric(signature: str) -> str:
        return "|".join(p for p in signature.split("|") if not p.startswith("version:"))

    first, *rest = signatures.items()
    if other := next(((src, sig) for src, sig in rest if metric(sig) != metric(first[1])), None):
        raise EvalFileError(
            f"evaluation records scored with different BLEU: {first[0]} has {first[1]} but {other[0]} has {other[1]}; "
            "score every run with the same sacreBLEU settings"
        )


def _common_indices(records: dict[str, EvalFile], bleu: dict[str, np.ndarray], ev: Evidence) -> set[int]:
    """Sentences every record scored; records must agree on dataset and on each shared sentence's reference (its
    text where both records hold it, else its length in sacreBLEU's tokens)."""
    datasets = {r.dataset for r in records.values()}
    if len(datasets) > 1:
        raise EvalFileError(f"evaluation records of different datasets in one study: {sorted(datasets)}")
    common = set.intersection(*(set(r.indices) for r in records.values()))
    if not common:
        raise EvalFileError(f"the runs' eval/{ev.split} records share no sentence (indices do not overlap)")
    if any(len(r.indices) != len(common) for r in records.values()):
        low, high = min(len(r.indices) for r in records.values()), max(len(r.indices) for r in records.values())
        ev.notes.append(f"The runs scored different sentences ({low} to {high}); every score here is on the {len(common)} they share.")
    text: dict[int, tuple[str, str]] = {}
    length: dict[int, tuple[int, str]] = {}
    for source, r in records.items():
        for i, idx in enumerate(r.indices):
            if idx not in common:
                continue
            ref_len = int(bleu[source][i, 1])
            if length.setdefault(idx, (ref_len, r.source))[0] != ref_len:
                raise EvalFileError(f"{r.source}: the reference of sentence {idx} differs from {length[idx][1]}'s (its length)")
            if r.references is not None and text.setdefault(idx, (r.references[i], r.source))[0] != r.references[i]:
                raise EvalFileError(f"{r.source}: the reference of sentence {idx} differs from {text[idx][1]}'s")
    return common
