"""The categorical parameter a variants trial's row is recorded under, so optuna-dashboard can plot a study per row
(which row a trial runs is decided by its enqueued fixed params, ablate.sweep.ledger.row_of; this is only the record)."""

from __future__ import annotations

import re

from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial


def row_param(trials: list[FrozenTrial], rows: list[str]) -> tuple[str, list[str]]:
    """Name and choices of the categorical parameter recording a variants trial's row: `row` over every row the study
    has queued, then `row_2`, `row_3`, ... over the grown set once rows are added to the sweep file.

    Optuna refuses a categorical parameter whose choices differ between trials of one study, and finished trials keep
    theirs, so a grown set of rows needs a new name. The names in use are read back from the trials themselves, so
    every worker and machine agrees on them; a row removed from the file stays a choice.
    """
    recorded: dict[str, list[str]] = {}
    for t in trials:
        for name, dist in t.distributions.items():
            if re.fullmatch(r"row(_\d+)?", name) and isinstance(dist, CategoricalDistribution):
                recorded[name] = list(dist.choices)
    if not recorded:
        return "row", list(dict.fromkeys(rows))
    latest = max(recorded, key=lambda n: int(n[4:] or 1))
    if set(rows) <= set(recorded[latest]):
        return latest, recorded[latest]
    return f"row_{int(latest[4:] or 1) + 1}", list(dict.fromkeys([*recorded[latest], *rows]))
