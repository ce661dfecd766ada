"""An evaluation record (`ablate.evaluation.records`) as a W&B run carries it, so `ablate table --wandb` can run the paired
tests on runs that exist only as W&B files.

The per-sentence lists go in a `wandb.Table`, one row per sentence (index, hypothesis, reference, NLL, tokens), so
the dashboard shows each row's translations beside the references; the summary keeps the scalar fields under
`eval/{split}` and the table under `eval/{split}_sentences`. W&B writes the table as a JSON file in the run's
`files/` directory and names it (path, sha256) in the summary; `read_records` puts the record back together.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ablate.evaluation.records import LISTS, SPLITS, EvalFileError

# Table column -> record list, in LISTS order.
COLUMNS = dict(zip(("index", "hypothesis", "reference", "nll", "tokens"), LISTS))


def table_key(split: str) -> str:
    return f"eval/{split}_sentences"


def log_record(experiment, record: dict) -> None:
    """Put `record` (as `eval_record` returns it, with its text) into a live W&B run's summary."""
    import wandb

    split = record["split"]
    rows = [list(row) for row in zip(*(record[name] for name in COLUMNS.values()))]
    experiment.summary[f"eval/{split}"] = {k: v for k, v in record.items() if k not in LISTS}
    experiment.summary[table_key(split)] = wandb.Table(columns=list(COLUMNS), data=rows)


def _table_rows(ref: dict, files: Path, where: str) -> dict[str, list]:
    """The record's lists from the table file a summary's table reference names, checked against its sha256."""
    path = files / str(ref.get("path", ""))
    if ref.get("_type") != "table-file" or not ref.get("path"):
        raise EvalFileError(f"{where}: not a W&B table reference")
    if not path.is_file():
        raise EvalFileError(f"{where}: its table file {path} is missing (copy the run's files/ directory with it)")
    data = path.read_bytes()
    if ref.get("sha256") and hashlib.sha256(data).hexdigest() != ref["sha256"]:
        raise EvalFileError(f"{where}: {path} does not match the sha256 the run recorded (changed or truncated)")
    try:
        table = json.loads(data)
        columns, rows = table["columns"], table["data"]
    except (ValueError, KeyError, TypeError) as e:
        raise EvalFileError(f"{where}: {path} is not a W&B table file ({e})") from e
    if sorted(columns) != sorted(COLUMNS):
        raise EvalFileError(f"{where}: {path} has columns {columns}, expected {list(COLUMNS)}")
    at = {c: i for i, c in enumerate(columns)}
    return {name: [row[at[c]] for row in rows] for c, name in COLUMNS.items()}


def read_records(summary: dict, files: Path, source: str) -> dict:
    """`summary` with each `eval/{split}` whose lists travel in a table made whole again (the rest unchanged)."""
    out = dict(summary)
    for split in SPLITS:
        ref = summary.get(table_key(split))
        if ref is None:
            continue
        where = f"{source} (summary key {table_key(split)})"
        scalars = summary.get(f"eval/{split}")
        if not isinstance(scalars, dict):
            raise EvalFileError(f"{where}: the run has the table but no summary key eval/{split}")
        out[f"eval/{split}"] = {**scalars, **_table_rows(ref, files, where)}
    return out
