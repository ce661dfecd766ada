"""Optuna samplers and pruners a sweep file can name, as registries: `sampler: {name: tpe, seed: 0}`.

Each entry builds the Optuna object from the rest of its spec, so a new one is a dict entry and the sweep
file's validation (the choices it lists) follows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna

from ablate.sweep.seeded_sampler import PerTrialSeed


def _grid(search: dict[str, dict], seed: int | None, **options: Any) -> optuna.samplers.BaseSampler:
    """Its seed orders the grid, alike in every worker; a trial's number picks its point. Never seeded per trial:
    workers with grids in different orders each ran some points twice and others never."""
    return optuna.samplers.GridSampler({k: s["choices"] for k, s in search.items()}, seed=seed, **options)


def _per_trial(build: Callable[..., optuna.samplers.BaseSampler]) -> Callable[..., optuna.samplers.BaseSampler]:
    """A seeded sampler drawing each trial's point from the seed and the trial's number (ablate.sweep.seeded_sampler):
    distinct for every worker and machine sharing the study and for each rerun, alike when a one-worker sweep is run
    again from scratch."""

    def make(search: dict[str, dict], seed: int | None, **options: Any) -> optuna.samplers.BaseSampler:
        first = build(seed=seed, **options)  # options it refuses fail here, as the sweep file is checked
        if seed is None:
            return first
        return PerTrialSeed(lambda trial_seed: build(seed=trial_seed, **options), seed)

    return make


# name -> factory(search space, seed, **options from the sweep file)
SAMPLERS: dict[str, Callable[..., optuna.samplers.BaseSampler]] = {
    "tpe": _per_trial(optuna.samplers.TPESampler),
    "random": _per_trial(optuna.samplers.RandomSampler),
    "grid": _grid,
    "cmaes": _per_trial(optuna.samplers.CmaEsSampler),
}

PRUNERS: dict[str, Callable[..., optuna.pruners.BasePruner]] = {
    "none": optuna.pruners.NopPruner,
    "median": optuna.pruners.MedianPruner,
    "successive_halving": optuna.pruners.SuccessiveHalvingPruner,
    "hyperband": optuna.pruners.HyperbandPruner,
}


def make_sampler(spec: dict, search: dict[str, dict]) -> optuna.samplers.BaseSampler:
    options = dict(spec)
    name, seed = options.pop("name"), options.pop("seed", None)
    return SAMPLERS[name](search, seed, **options)


def make_pruner(spec: dict) -> optuna.pruners.BasePruner:
    """Also called by a trial's own process, from the spec its worker hands it (never from the sweep file)."""
    options = dict(spec)
    return PRUNERS[options.pop("name")](**options)


def suggest(trial: optuna.Trial, key: str, spec: dict) -> Any:
    if spec["type"] == "categorical":
        try:
            return trial.suggest_categorical(key, spec["choices"])
        except ValueError as e:  # Optuna: "does not support dynamic value space"
            held = next((t.distributions[key] for t in trial.study.get_trials(deepcopy=False) if key in t.distributions), None)
            if held is None:
                raise
            raise ValueError(
                f"search.'{key}': the study holds the choices {list(held.choices)!r}, the sweep file {list(spec['choices'])!r}; "
                "a study's choices cannot change: write them as the study began (numbers such as 1e-3, read as text "
                "before ablate read them as YAML 1.2 does, quoted: '1e-3'), or start a new study"
            ) from e
    if spec["type"] == "int":
        return trial.suggest_int(key, int(spec["low"]), int(spec["high"]), step=int(spec.get("step") or 1), log=bool(spec.get("log")))
    return trial.suggest_float(key, float(spec["low"]), float(spec["high"]), step=spec.get("step"), log=bool(spec.get("log")))
