"""A seeded sampler whose draw for a trial depends on the seed and that trial's number alone.

Workers, and machines, sharing one study each built the sampler from the seed and drew the same points: a budget
of 4 trained 2 distinct points twice. A stream per worker (its index, the trials at its start) still drew alike on
two machines started at the same instant, each running worker 0. A trial's number is unique in its study, given by
the storage, so seeding each trial's own sampler with (seed, number) draws distinct points wherever it runs, and
the same ones when a one-worker sweep is run again from scratch. What a sampler learns from finished trials (TPE,
CMA-ES) it reads from the storage, never from its own instance, so a fresh instance per trial loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState


class PerTrialSeed(optuna.samplers.BaseSampler):
    """Delegates each trial to a sampler built by `build(seed)` for it, seeded by (`seed`, the trial's number)."""

    def __init__(self, build: Callable[[int], optuna.samplers.BaseSampler], seed: int):
        self._build, self._seed = build, seed
        self._by_trial: dict[int, optuna.samplers.BaseSampler] = {}  # asked here and not yet told

    def _of(self, trial: FrozenTrial) -> optuna.samplers.BaseSampler:
        if trial.number not in self._by_trial:
            seed = int(np.random.SeedSequence([self._seed, trial.number]).generate_state(1)[0])
            self._by_trial[trial.number] = self._build(seed)
        return self._by_trial[trial.number]

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._of(trial).before_trial(study, trial)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self._of(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self._of(trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution) -> Any:
        return self._of(trial).sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self._of(trial).after_trial(study, trial, state, values)  # the grid's: stop the study once every point ran
        self._by_trial.pop(trial.number, None)

    def reseed_rng(self) -> None:
        """Optuna calls this for threads of one `optimize` (never in a sweep); their trials' numbers already differ."""
