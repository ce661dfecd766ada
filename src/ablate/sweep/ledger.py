"""How a trial's fate is written into the study, and read back: its row, its result, why it failed.

A trial failed *with* a `fail_reason` failed by itself (NaN, a bad override, a crash) and is not retried
within a run; one failed *without* a reason died with its worker or was preempted, and its row runs again.
Bookkeeping failures (a duplicate claim, an empty queue) never ran a row and count for nothing.
"""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

BOOKKEEPING = "[not run] "  # fail_reason prefix of trials that never ran a row (duplicates, empty queue)
KILLED = "killed"  # user attribute of a trial whose process a signal killed (`was_killed`)


def tell(study: optuna.Study, trial: optuna.Trial, value: float | None = None, state: TrialState | None = None) -> None:
    """study.tell, tolerating GridSampler's study.stop() after the last grid point, which raises outside
    optimize(); the result is stored before that (Optuna saves the state in a `finally`)."""
    try:
        study.tell(trial, value, state=state)
    except RuntimeError as e:
        if "Study.stop" not in str(e):
            raise


def fail(study: optuna.Study, trial: optuna.Trial, reason: str | None = None) -> TrialState:
    """Mark the trial FAIL; with no reason its row counts as interrupted and is queued again."""
    if reason is not None:
        trial.set_user_attr("fail_reason", reason[:500])
    tell(study, trial, state=TrialState.FAIL)
    return TrialState.FAIL


def row_of(t: FrozenTrial) -> tuple[str, int | None] | None:
    """(row, seed) of a variants trial, from the parameters it was enqueued with; None for a search trial."""
    fixed = t.system_attrs.get("fixed_params") or {}
    return (fixed["row"], fixed.get("seed")) if "row" in fixed else None


def is_bookkeeping(t: FrozenTrial) -> bool:
    return str(t.user_attrs.get("fail_reason", "")).startswith(BOOKKEEPING)


def failed_by_itself(t: FrozenTrial) -> bool:
    """Failed with a reason of its own (not a dead worker, not a preemption, not bookkeeping)."""
    return t.state == TrialState.FAIL and "fail_reason" in t.user_attrs and not is_bookkeeping(t)


def was_interrupted(t: FrozenTrial) -> bool:
    """Failed without a reason: its worker died or it was preempted or stopped, so its row runs (continues) again."""
    return t.state == TrialState.FAIL and "fail_reason" not in t.user_attrs


def was_killed(t: FrozenTrial) -> bool:
    """Killed by a signal from outside (the OOM killer, a scheduler's kill -9; ablate.sweep.trial.record_result): failed,
    so not retried within a run, but what it saved is whole, and a rerun of the sweep continues it."""
    return t.state == TrialState.FAIL and bool(t.user_attrs.get(KILLED))


def attempts(t: FrozenTrial) -> list[int]:
    """A search trial's attempts up to and with it: the numbers it retries (`retry_history`), then its own."""
    return [*t.system_attrs.get("retry_history", []), t.number]


def retry_of(t: FrozenTrial) -> int | None:
    """The attempt a search trial's retry continues (the last of its `retry_history`); None for a first attempt."""
    history = t.system_attrs.get("retry_history")
    return history[-1] if history else None


def left_interrupted(trials: list[FrozenTrial], killed: bool = False) -> list[FrozenTrial]:
    """The last attempt of each run (a variants row's seed; a search trial with its retries) that was interrupted and
    has no attempt after it; with `killed`, or killed by a signal (failed, which only a rerun of the sweep continues)."""
    trials = [t for t in trials if not is_bookkeeping(t)]
    retried = {retry_of(t) for t in trials}
    last: dict = {}
    for t in trials:
        key = row_of(t) or ("search", t.number)
        if key not in last or t.number > last[key].number:
            last[key] = t
    left = [t for t in last.values() if was_interrupted(t) or (killed and was_killed(t))]
    return [t for t in left if t.number not in retried]


def continued_attempt(earlier: list[FrozenTrial], root: Path) -> FrozenTrial | None:
    """The earlier attempt a new one may continue: the last that made a run directory, if it and every attempt after it
    stopped with no reason of its own (its worker died, or it was preempted; one stopped before it made its directory is
    passed over) or was killed by a signal (the OOM killer: failed, so not retried within a run, but what it saved is
    whole, and starting over would only reach the same step later), and that directory is directly inside `root` (the
    sweep's trials/). Whether its files can continue it
    (a checkpoint, no live process) is for its caller to judge, a run's or a member group's."""
    for last in sorted(earlier, key=lambda t: t.number, reverse=True):
        if "fail_reason" in last.user_attrs and not was_killed(last):
            return None
        if "out_dir" in last.user_attrs:
            return last if Path(last.user_attrs["out_dir"]).parent == root else None
    return None
