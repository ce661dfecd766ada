"""Finished rows whose sweep file now gives them another config. A rerun trains only the rows with no finished trial,
so a row edited after it finished kept its old result in silence, and the table showed it as the new one: each such
row is named, with what changed and how to train the new config."""

from __future__ import annotations

from pathlib import Path

from optuna.trial import FrozenTrial, TrialState

from ablate.config import flatten, read_run_config, to_dict
from ablate.config.trained import trained_differences
from ablate.sweep.ledger import row_of
from ablate.sweep.spec import Sweep


def changed_rows(sweep: Sweep, trials: list[FrozenTrial]) -> list[str]:
    """One line per row of `sweep` whose first finished trial trained another config than the row gives now (its
    model, data and train sections; where and how it ran aside). A trial whose run folder is gone or damaged is not
    read: `ablate table` names it."""
    said, checked = [], set()
    for t in trials:
        key = row_of(t)
        if t.state != TrialState.COMPLETE or key is None or key[0] in checked or key[0] not in sweep.variants:
            continue
        try:
            saved = flatten(read_run_config(Path(t.user_attrs["out_dir"]) / "config.yaml"))
        except (KeyError, OSError, ValueError):
            continue
        row = key[0]
        checked.add(row)
        if diff := trained_differences(saved, flatten(to_dict(sweep.row_config(sweep.variants[row])))):
            changes = ", ".join(f"{k}: {was!r} -> {now!r}" for k, (was, now) in diff.items())
            said.append(
                f"row '{row}' finished (trial {t.number}) on another config than {sweep.path} gives it now ({changes}): "
                "its result stands and it is not trained again; to train the new config, give the row a new name or the "
                "sweep another out_dir"
            )
    return said
