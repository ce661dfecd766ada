"""A study's trials as a results table in the sweep's out_dir: results.csv and results.json, one row per trial that ran
(its state, objective, scores and what they are on, ablate.sweep.scored_on), each file whole or not at all. A state is
Optuna's, or CONTINUED / INTERRUPTED for an attempt stopped with no reason of its own, as `ablate status` says it.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ablate.files.atomic import write_file
from ablate.files.json_file import object_or_empty
from ablate.sweep.ledger import is_bookkeeping, was_interrupted
from ablate.sweep.scored_on import objective_on, scored_on
from ablate.sweep.snapshot import interruption, killed_and_continued, later_attempts
from ablate.sweep.spec import Sweep

COLUMNS = [
    "number",
    "name",
    "state",
    "value",
    "val/bleu",
    "val/ppl",
    "epochs",
    "params",
    "speed/tokens_per_s",
    "speed/step_ms",
    "wall_seconds",
    "out_dir",
    "fail_reason",
    "val/bleu_on",
    "val/ppl_on",
    "objective_on",
]


_FROM_ATTRS = ("val/bleu", "val/ppl", "params", "speed/tokens_per_s", "speed/step_ms", "wall_seconds", "out_dir", "fail_reason")


def summarize(sweep: Sweep, study: optuna.Study) -> list[dict]:
    """One row per trial that started. An attempt failed without a reason of its own (or killed, and continued in its
    directory) is said to be continued (by the trial `ablate status` names) or interrupted, and the summary.json of its
    run directory is not read: a later attempt trained on in that directory, and its epochs and scores are not this
    attempt's."""
    trials = study.get_trials(deepcopy=False)
    later = later_attempts([t for t in trials if t.state != TrialState.WAITING and not is_bookkeeping(t)])
    rows = []
    for t in trials:
        if t.state == TrialState.WAITING or is_bookkeeping(t):  # a bookkeeping trial ran nothing (a duplicate, a row gone)
            continue
        row = {"number": t.number, "state": t.state.name, "value": t.value, "name": t.user_attrs.get("name", "")}
        row |= {k: t.user_attrs.get(k) for k in _FROM_ATTRS}
        taken_over = was_interrupted(t) or killed_and_continued(t, later)
        if taken_over:
            state, row["fail_reason"] = interruption(t, later)
            row |= {"state": state.upper(), "value": None, "val/bleu": None, "val/ppl": None}  # scores are the run's, of the later attempt
        if t.user_attrs.get("out_dir") and t.state != TrialState.RUNNING and not taken_over:
            row |= _from_summary(sweep, Path(t.user_attrs["out_dir"]))
        rows.append({k: row.get(k) for k in COLUMNS})
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    write_file(sweep.out_dir / "results.csv", table.getvalue())  # whole or not at all, also on a full disk
    write_file(sweep.out_dir / "results.json", json.dumps(rows, indent=2))
    return rows


def _from_summary(sweep: Sweep, run_dir: Path) -> dict:
    """The columns read from a finished run's summary.json (none where it has none)."""
    summary = object_or_empty(run_dir / "summary.json")
    if not summary:
        return {}
    on = scored_on(summary, run_dir)
    epochs = summary.get("epochs")
    epochs = epochs if isinstance(epochs, (int, float)) and not isinstance(epochs, bool) else None
    return {
        "epochs": epochs,
        "val/bleu_on": on["val/bleu"],
        "val/ppl_on": on["val/ppl"],
        "objective_on": objective_on(summary, sweep.objective.terms),
    }
