"""A search sweep's plan: an Optuna search space with a sampler and a pruner."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState, create_trial

from ablate.files.yaml_file import key_line
from ablate.sweep.components import make_sampler, suggest
from ablate.sweep.ledger import BOOKKEEPING, attempts, failed_by_itself, is_bookkeeping, left_interrupted, retry_of
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
        if self.sweep.seeds:  # each trial is one drawn point, trained once: the list was read and never used
            line = key_line(self.sweep.path, "seeds")
            return (
                f"seeds{f' (line {line})' if line else ''}: a variants sweep's rows are trained once per seed; a search "
                "trains each point it draws once, at the base's seed: remove seeds, or search over seed itself "
                "(search: {seed: {type: categorical, choices: [1, 2, 3]}})"
            )
        return None

    def sampler(self) -> optuna.samplers.BaseSampler:
        return make_sampler(self.sweep.sampler, self.sweep.search)

    def queue(self, study: optuna.Study, only_dead: bool = False, since: int = 0) -> int:
        """A retry of each interrupted trial that has none, to continue it from its checkpoint. A trial failed without a
        reason was not the search's doing: left alone, a grid counted its point as visited and never trained it, and
        another sampler drew a fresh trial in its place. One killed by a signal (the OOM killer) is retried by a rerun
        of the sweep only (`only_dead`: within a run, not), as a variants row is."""
        trials = study.get_trials(deepcopy=False)
        queued = 0
        for t in left_interrupted(trials, killed=not only_dead):
            history = attempts(t)
            if only_dead and sum(n >= since for n in history) > MAX_RETRY:
                continue
            # As Optuna's RetryHeartbeatStaleTrialCallback (`failed_trial`, `retry_history`; the sampler's system
            # attributes, a grid point's id), without the user attributes that were the interrupted attempt's own.
            system = {**t.system_attrs, "failed_trial": history[0], "retry_history": history}
            study.add_trial(create_trial(state=TrialState.WAITING, params=t.params, distributions=t.distributions, system_attrs=system))
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
        trials = study.get_trials(deepcopy=False)
        if any(t.state == TrialState.WAITING for t in trials):
            return "run"  # a retry, whatever the budget: the run it continues was counted in it
        budget = self.budget()
        if budget:
            done, running = self._spent(trials), sum(t.state == TrialState.RUNNING for t in trials)
            if done >= budget:
                return "stop"
            if done + running >= budget:
                return "wait" if running else "stop"
        return "run"

    @staticmethod
    def _spent(trials: list[FrozenTrial]) -> int:
        """The budget spent, running trials aside: finished trials, failed ones too (as in Optuna's optimize), and a run
        left interrupted (its retries spent in this run), which a rerun continues rather than a new draw. Not
        bookkeeping trials that never ran, nor an attempt that has a retry (interrupted, or killed by a signal: the
        retry counts, and a killed one counted twice trained one point fewer than the budget)."""
        retried = {retry_of(t) for t in trials}
        spent = sum(
            t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (failed_by_itself(t) and t.number not in retried) for t in trials
        )
        return spent + len(left_interrupted(trials))

    def _taken(self, trials: list[FrozenTrial]) -> int:
        """The budget spent or running in `trials`."""
        return self._spent(trials) + sum(t.state == TrialState.RUNNING for t in trials)

    def take_partners(self, handle: StudyHandle, trial: optuna.Trial, n: int) -> list[optuna.Trial]:
        budget = self.budget()
        if budget:  # no more trials than the budget has left
            trials = handle.study.get_trials(deepcopy=False)
            n = min(n, max(budget - self._taken(trials), 0))
        return super().take_partners(handle, trial, n)

    def claim(self, handle: StudyHandle, trial: optuna.Trial) -> TrialSpec | str:
        history = attempts(handle.frozen(trial))[:-1]
        ahead = [t for t in handle.study.get_trials(deepcopy=False) if t.number < trial.number]
        if history:  # two workers may queue a retry of one trial at once: the first queued trains, whenever it is taken
            for t in ahead:
                if retry_of(t) == history[-1] and not is_bookkeeping(t):
                    return BOOKKEEPING + f"duplicate: trial {history[-1]} is already retried as trial {t.number}"
        elif (budget := self.budget()) and self._taken(ahead) >= budget:
            # Workers on a server's study decide at once, each from what it read, and each draws (no claim lock there):
            # the lowest numbers take what the budget has left.
            return BOOKKEEPING + f"budget spent: trials numbered below this one drew all {budget} of it"
        overrides = {key: suggest(trial, key, spec) for key, spec in self.sweep.search.items()}
        name = f"trial{(history or [trial.number])[0]}"  # a retry is its first attempt's run, continued under its name
        return TrialSpec(name, name, overrides, None, ["search"])

    def earlier_attempts(self, handle: StudyHandle, trial: optuna.Trial) -> list[FrozenTrial]:
        return [handle.by_number(n) for n in attempts(handle.frozen(trial))[:-1]]

    def describe(self) -> tuple[list[str], list[list[str]], str]:
        rows = []
        for key, spec in self.sweep.search.items():
            dist = (
                spec["choices"]
                if spec["type"] == "categorical"
                else f"{spec['type']} [{spec['low']}, {spec['high']}]{' log' if spec.get('log') else ''}"
                + (f" step {spec['step']}" if spec.get("step") is not None else "")
            )
            rows.append([key, str(dist)])
        s = self.sweep
        return ["parameter", "distribution"], rows, f"sampler {s.sampler}, pruner {s.pruner}, n_trials {s.n_trials}, timeout {s.timeout}"
