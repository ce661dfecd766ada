"""What each of a trial's scores is on: a run's val/ppl is on the whole validation split and its val/bleu often on a
sample of it (train.val_max_sentences), while `ablate table` scores both on the runs' evaluation records; so the sweep's
results and the table name the split and sentences of each score (`scored_on`), and of the objective (`objective_on`),
and where the two tables' numbers differ, each says on which sentences.
"""

from __future__ import annotations

import re
from pathlib import Path

from ablate.files.json_file import object_or_empty

_SAMPLE = re.compile(r"random (\d+) of (\d+)(?: \(seed (\S+)\))?")  # ablate.evaluation.records.describe_subset's words


def sentences(split: str, subset: str, total: int | None = None) -> str:
    """ "valid split, all 1,014 sentences" or "valid split, 200 of 1,014 sentences (random, seed 0)", from a
    `subset` as ablate.evaluation.records.describe_subset words it ("all", "random 200 of 1014 (seed 0)")."""
    if subset == "all" and total:
        return f"{split} split, all {total:,} sentences"
    if m := _SAMPLE.fullmatch(subset):
        return f"{split} split, {int(m[1]):,} of {int(m[2]):,} sentences (random" + (f", seed {m[3]})" if m[3] else ")")
    return f"{split} split, {subset}"


def scored_on(summary: dict, run_dir: Path | None = None) -> dict[str, str | None]:
    """What a run summary's validation scores are on, per metric; None where it does not say (a run from before
    ablate recorded it). val/loss and val/ppl: the whole split; val/bleu: train.val_max_sentences of it, or with
    train.val_bleu off, the evaluation record's sentences (the same sample), whose `subset` says which."""
    split, total = summary.get("val/split"), summary.get("val/sentences")
    split = split if isinstance(split, str) else None
    whole = sentences(split, "all", total) if split and isinstance(total, int) else None
    subset = summary.get("val/bleu_subset") or _record_subset(summary, run_dir)
    bleu = sentences(split or "valid", subset, total) if isinstance(subset, str) else None
    return {"val/loss": whole, "val/ppl": whole, "val/bleu": bleu}


def _record_subset(summary: dict, run_dir: Path | None) -> str | None:
    record = summary.get("eval/valid")  # a W&B run's summary carries its record
    if not isinstance(record, dict) and run_dir is not None and isinstance(summary.get("eval_record"), str):
        record = object_or_empty(run_dir / summary["eval_record"])
    return record.get("subset") if isinstance(record, dict) else None


def objective_on(summary: dict, terms: dict[str, float]) -> str:
    """Where each term of the objective comes from, as ablate.sweep.trial.metric_value reads it: the best
    validation's value (the checkpoint monitor's, unless the weights are averaged), else the last validation's, else
    the run's summary; e.g. "val/bleu at the best validation"."""
    averaged = str(summary.get("selected", "")).startswith("avg")
    best, last = (summary.get(k) if isinstance(summary.get(k), dict) else {} for k in ("best", "last"))
    parts = []
    for name, weight in terms.items():
        if not averaged and best.get("metric") == name and best.get("value") is not None:
            where = f"{name} at the best validation"
        elif name in last:
            where = f"{name} at the last validation"
        else:
            where = f"{name} of the whole run"
        parts.append(where if weight == 1 else f"{weight:g} × {where}")
    return " + ".join(parts)
