"""A search sweep's plan: an Optuna search space with a sampler and a pruner."""

from __future__ import annotations

import copy

import optuna
from optuna.trial import FrozenTrial, TrialState

from ablate.sweep.components import make_sampler, suggest
from ablate.sweep.ledger import BOOKKEEPING, failed_by_itself, was_interrupted
from ablate.sweep.plan_base import MAX_RETRY, Plan, TrialSpec
from ablate.sweep.storage import StudyHandle


class Search(Plan):
    """An Optuna search space with a sampler and a pruner, bounded by n_trials, a timeout or its grid."""

    def check(self) -> str | None:
        space = self.sweep.search.values()
        if self.sweep.sampler["name"] == "grid" and any(s["type"] != "categorical" for s in space):
            return "sampler 'grid' needs every search parameter to be categorical"
        if not self.sweep.n_trials and not self.sweep.timeout and self.sweep.sampler["name"] != "grid":
            return "a search sweep needs a budget: n_trials or timeout (a grid search is bounded by its grid)"
        return None

    def sampler(self) -> optuna.samplers.BaseSampler:
        return make_sampler(self.sweep.sampler, self.sweep.search)

    def queue(self, study: optuna.Study, only_dead: bool = False, since: int = 0) -> int:
        """A retry of each interrupted trial that has none (Optuna's RetryHeartbeatStaleTrialCallback makes it: its
        parameters, its attempts in `retry_history`), to continue it from its checkpoint. A trial failed without a reason
        was not the search's doing: left alone, a grid counted its point as visited and never trained it, and another
        sampler drew a fresh trial in its place."""
        trials = study.get_trials(deepcopy=False)
        retried = {attempts[-1] for t in trials if (attempts := t.system_attrs.get("retry_history"))}
        queued = 0
        for t in trials:
            if not was_interrupted(t) or t.number in retried:
                continue
            if only_dead and sum(n >= since for n in [*t.system_attrs.get("retry_history", []), t.number]) > MAX_RETRY:
                continue
            optuna.storages.RetryHeartbeatStaleTrialCallback()(study, copy.deepcopy(t))  # it appends to t's history
            queued += 1
        return queued

    def budget(self) -> int | None:
        """Trials the search may finish: n_trials, or the number of grid points, whichever is smaller."""
        grid = None
        if self.sweep.sampler["name"] == "grid":
            grid = 1
            for spec in self.sweep.search.values():
                grid *= len(spec["choices"])
        return min((n for n in (self.sweep.n_trials, grid) if n), default=None)

    def next_action(self, study: optuna.Study, started: float) -> str:
        if self.timed_out(started):
            return "stop"
        budget = self.budget()
        if budget:
            trials = study.get_trials(deepcopy=False)
            # Finished trials use up the budget, failed ones too (as in Optuna's optimize), except interrupted ones
            # (retried by `queue`) and bookkeeping ones that never ran.
            done = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) or failed_by_itself(t) for t in trials)
            running = sum(t.state == TrialState.RUNNING for t in trials)
            if done >= budget:
                return "stop"
            if done + running >= budget:
                return "wait"
        return "run"

    def take_partners(self, handle: StudyHandle, trial: optuna.Trial, n: int) -> list[optuna.Trial]:
        budget = self.budget()
        if budget:  # no more trials than the budget has left
            trials = handle.study.get_trials(deepcopy=False)
            used = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING) or failed_by_itself(t) for t in trials)
            n = min(n, max(budget - used, 0))
        return super().take_partners(handle, trial, n)

    def claim(self, handle: StudyHandle, trial: optuna.Trial) -> TrialSpec | str:
        me = handle.frozen(trial)
        if attempts := me.system_attrs.get("retry_history"):  # two workers may queue a retry of one trial at once
            for t in handle.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)):
                earlier = t.state != TrialState.RUNNING or (t.datetime_start, t.number) < (me.datetime_start, me.number)
                if t.number != me.number and (t.system_attrs.get("retry_history") or [None])[-1] == attempts[-1] and earlier:
                    return BOOKKEEPING + f"duplicate: trial {attempts[-1]} is already retried as trial {t.number}"
        overrides = {key: suggest(trial, key, spec) for key, spec in self.sweep.search.items()}
        name = f"trial{(attempts or [trial.number])[0]}"  # a retry is its first attempt's run, continued under its name
        return TrialSpec(name, name, overrides, None, ["search"])

    def earlier_attempts(self, handle: StudyHandle, trial: optuna.Trial) -> list[FrozenTrial]:
        return [handle.by_number(n) for n in handle.frozen(trial).system_attrs.get("retry_history", [])]

    def describe(self) -> tuple[list[str], list[list[str]], str]:
        rows = []
        for key, spec in self.sweep.search.items():
            dist = (
                spec["choices"]
                if spec["type"] == "categorical"
                else f"{spec['type']} [{spec['low']}, {spec['high']}]{' log' if spec.get('log') else ''}"
            )
            rows.append([key, str(dist)])
        s = self.sweep
        return ["parameter", "distribution"], rows, f"sampler {s.sampler}, pruner {s.pruner}, n_trials {s.n_trials}, timeout {s.timeout}"
