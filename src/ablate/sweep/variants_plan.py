"""A variants sweep's plan: named rows times seeds, each a queued trial with fixed parameters."""

from __future__ import annotations

import logging
import time

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from ablate.config.paper import row_group
from ablate.files.yaml_file import key_line
from ablate.sweep.changed_rows import changed_rows
from ablate.sweep.ledger import BOOKKEEPING, failed_by_itself, is_bookkeeping, row_of, was_interrupted, was_killed
from ablate.sweep.plan_base import MAX_RETRY, Plan, TrialSpec
from ablate.sweep.row_param import row_param
from ablate.sweep.spec import diff_from_base
from ablate.sweep.storage import StudyHandle

QUEUED = "queued_at"  # when a row was queued (time.time()): a trial that failed by itself after it makes it a duplicate

log = logging.getLogger(__name__)
BUDGET = ("n_trials", "timeout")  # a search's budget (ablate.sweep.search_plan); refused in a variants sweep


class Variants(Plan):
    """Named rows times seeds, enqueued as WAITING trials with fixed parameters; a worker takes one atomically with
    `study.ask()`, and a row already finished or taken by an earlier-started trial is skipped, so racing workers
    (or machines) never run a row twice."""

    def check(self) -> str | None:
        """n_trials and timeout are a search's budget: a grid's is its rows times their seeds. Taken here, a timeout
        stopped the study with rows never trained (and the sweep said no trials were left); n_trials did nothing."""
        given = [key for key in BUDGET if getattr(self.sweep, key) is not None]
        if not given:
            return None
        at = [f"{key}{f' (line {line})' if (line := key_line(self.sweep.path, key)) else ''}" for key in given]
        return (
            f"{' and '.join(at)}: a search's budget, which a variants sweep does not take (it trains every row once per "
            f"seed); remove {' and '.join(given)}, or list fewer rows or seeds"
        )

    def sampler(self) -> optuna.samplers.BaseSampler:
        # Rows are enqueued with fixed params and never sampled; the sampler only has to stay out of the way.
        return optuna.samplers.RandomSampler(seed=self.sweep.sampler.get("seed"))

    def queue(self, study: optuna.Study, only_dead: bool = False, since: int = 0) -> int:
        """Queue every (row, seed) with no finished, running or queued trial; a finished row the file now gives another
        config is named (ablate.sweep.changed_rows), not trained again.

        With `only_dead`, only rows whose last trial was interrupted (failed without a reason of its own) are queued
        again, at most MAX_RETRY times a run: a row that fails by itself (NaN, bad override) is not retried within a
        run, only when the user re-runs the sweep.
        """
        trials = study.get_trials(deepcopy=False)
        for line in [] if only_dead else changed_rows(self.sweep, trials):
            log.warning(line)
        planned = self.sweep.rows()
        gone = sorted({key for t in trials if t.state == TrialState.WAITING and (key := row_of(t)) and key not in planned}, key=str)
        if gone and not only_dead:  # queued by a run stopped before them; claim() drops each as it comes up
            named = ", ".join(row if seed is None else f"{row} seed {seed}" for row, seed in gone)
            log.warning("not trained, though an earlier run queued them: %s (no longer in %s)", named, self.sweep.path)
        busy = {row_of(t) for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)}
        failed: dict[tuple, list[FrozenTrial]] = {}
        for t in trials:
            if t.state == TrialState.FAIL and row_of(t) is not None and not is_bookkeeping(t):
                failed.setdefault(row_of(t), []).append(t)
        queued = 0
        for row, seed in planned:
            if (row, seed) in busy:
                continue
            if only_dead:
                history = failed.get((row, seed), [])
                dead = [t for t in history if was_interrupted(t) and t.number >= since]
                if not history or "fail_reason" in history[-1].user_attrs or len(dead) > MAX_RETRY:
                    continue
            params = {"row": row} if seed is None else {"row": row, "seed": seed}
            study.enqueue_trial(params, user_attrs={"row": row, "seed": seed, QUEUED: time.time()})
            queued += 1
        return queued

    def members(self, handle: StudyHandle, trial: optuna.Trial) -> int:
        key = row_of(handle.frozen(trial))
        if key is None or key[0] not in self.sweep.variants:
            return 1
        return self.sweep.row_config(self.sweep.variants[key[0]]).members.size

    def take_partners(self, handle: StudyHandle, trial: optuna.Trial, n: int) -> list[optuna.Trial]:
        row = row_of(handle.frozen(trial))[0]
        return [t for t in (self.take(handle, lambda key: key[0] == row) for _ in range(n)) if t is not None]

    def take(self, handle: StudyHandle, wanted=None) -> optuna.Trial | None:
        """Start a queued row (with `wanted`, one whose (row, seed) it accepts), interrupted rows first; None when
        other workers took every queued row meanwhile.

        Optuna's ask() pops queued trials by number, so a rerun would start every row the first run had queued before
        continuing any interrupted one, and half-trained runs would wait hours. The claim itself is Optuna's: a
        WAITING trial set to RUNNING, which only one process can do (SELECT ... FOR UPDATE; on SQLite, ablate's claim
        lock). Taking nothing, rather than asking for a new trial, leaves no never-run trial in the study.
        """
        trials = handle.study.get_trials(deepcopy=False)
        # half-trained first: interrupted, or killed by a signal (which a rerun continues from its checkpoint)
        interrupted = {row_of(t) for t in trials if was_interrupted(t) or was_killed(t)}
        waiting = (t for t in trials if t.state == TrialState.WAITING and (wanted is None or (row_of(t) and wanted(row_of(t)))))
        queued = sorted(waiting, key=lambda t: (row_of(t) not in interrupted, t.number))
        for t in queued:
            try:
                if handle.storage.set_trial_state_values(handle.trial_id(t.number), state=TrialState.RUNNING):
                    return optuna.Trial(handle.study, handle.trial_id(t.number))
            except optuna.exceptions.UpdateFinishedTrialError:  # finished meanwhile (failed by another machine)
                continue
        return None

    def next_action(self, study: optuna.Study, started: float) -> str:
        states = [t.state for t in study.get_trials(deepcopy=False)]
        if TrialState.WAITING in states:
            return "run"
        return "wait" if TrialState.RUNNING in states else "stop"

    def claim(self, handle: StudyHandle, trial: optuna.Trial) -> TrialSpec | str:
        me = handle.frozen(trial)
        if row_of(me) is None:
            return BOOKKEEPING + "no queued row left (taken by another worker)"
        row, seed = row_of(me)
        if (row, seed) not in self.sweep.rows():  # queued by a run the file has since been trimmed for: not this study's
            what = f"row '{row}'" if row not in self.sweep.variants else f"row '{row}' seed {seed}"
            return BOOKKEEPING + f"{what} was queued but is no longer in {self.sweep.path}"
        if twin := self._twin(handle, me):
            return BOOKKEEPING + f"duplicate: row {row} (seed {seed}) is already {twin.state.name.lower()} as trial {twin.number}"
        self._record_row(handle, trial, row)
        name = row if seed is None else f"{row}-s{seed}"
        tags = [row, row_group(row)] + ([f"seed{seed}"] if seed is not None else [])
        return TrialSpec(name, row, dict(self.sweep.variants[row]), seed, tags)

    def _twin(self, handle: StudyHandle, me: FrozenTrial) -> FrozenTrial | None:
        """Another trial of my row and seed that I must not train again: finished or pruned, started before me, or failed
        by itself after I was queued (two sweeps starting at once each queued the row). A retry of an interrupted or
        killed attempt is no twin: it continues that attempt."""
        queued = me.user_attrs.get(QUEUED)
        for t in handle.study.get_trials(
            deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.FAIL)
        ):
            if t.number == me.number or row_of(t) != row_of(me):
                continue
            if t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
                t.state == TrialState.RUNNING and (t.datetime_start, t.number) < (me.datetime_start, me.number)
            ):
                return t
            failed_after = queued is not None and t.datetime_complete is not None and t.datetime_complete.timestamp() > queued
            if failed_by_itself(t) and not was_killed(t) and failed_after:
                return t
        return None

    def _record_row(self, handle: StudyHandle, trial: optuna.Trial, row: str) -> None:
        """The row as a categorical parameter of the trial, so optuna-dashboard can plot the study per row. (Which row
        a trial runs is decided by its enqueued fixed params, read by ledger.row_of; this is only the record.)"""
        for attempt in range(2):
            trials = handle.study.get_trials(deepcopy=False)
            name, choices = row_param(trials, [r for r, _ in self.sweep.rows()] + [key[0] for t in trials if (key := row_of(t))])
            try:
                handle.storage.set_trial_param(handle.trial_id(trial.number), name, choices.index(row), CategoricalDistribution(choices))
                return
            except ValueError as e:  # another machine (another version of the file) recorded other rows under this name
                if attempt:
                    log.warning("trial %d: row '%s' not recorded as parameter %s: %s", trial.number, row, name, e)

    def earlier_attempts(self, handle: StudyHandle, trial: optuna.Trial) -> list[FrozenTrial]:
        key = row_of(handle.frozen(trial))
        return [
            t
            for t in handle.study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
            if t.number < trial.number and row_of(t) == key and not is_bookkeeping(t)
        ]

    def describe(self) -> tuple[list[str], list[list[str]], str]:
        rows, base_seed, diffs = [], self.sweep.row_config({}).seed, {}
        for row, seed in self.sweep.rows():
            if row not in diffs:  # once per row, not per seed: the seed's own difference is added below
                cfg = self.sweep.row_config(self.sweep.variants[row])
                diffs[row] = ({k: v for k, v in diff_from_base(self.sweep, cfg).items() if k != "seed"}, cfg.seed)
            diff, row_seed = diffs[row]
            if (seed if seed is not None else row_seed) != base_seed:
                diff = dict(sorted({**diff, "seed": (base_seed, seed if seed is not None else row_seed)}.items()))
            rows.append([row, "-" if seed is None else str(seed), ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in diff.items()) or "(base)"])
        return ["row", "seed", "differences from the base config"], rows, f"{len(rows)} trial{'s' * (len(rows) != 1)}"
