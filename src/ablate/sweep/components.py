"""Optuna samplers and pruners a sweep file can name, as registries: `sampler: {name: tpe, seed: 0}`.

Each entry builds the Optuna object from the rest of its spec, so a new one is a dict entry and the sweep
file's validation (the choices it lists) follows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import optuna


def _grid(search: dict[str, dict], seed: int | None, **options: Any) -> optuna.samplers.BaseSampler:
    return optuna.samplers.GridSampler({k: s["choices"] for k, s in search.items()}, seed=seed, **options)


# name -> factory(search space, seed, **options from the sweep file)
SAMPLERS: dict[str, Callable[..., optuna.samplers.BaseSampler]] = {
    "tpe": lambda search, seed, **o: optuna.samplers.TPESampler(seed=seed, **o),
    "random": lambda search, seed, **o: optuna.samplers.RandomSampler(seed=seed, **o),
    "grid": _grid,
    "cmaes": lambda search, seed, **o: optuna.samplers.CmaEsSampler(seed=seed, **o),
}

PRUNERS: dict[str, Callable[..., optuna.pruners.BasePruner]] = {
    "none": optuna.pruners.NopPruner,
    "median": optuna.pruners.MedianPruner,
    "successive_halving": optuna.pruners.SuccessiveHalvingPruner,
    "hyperband": optuna.pruners.HyperbandPruner,
}


def make_sampler(spec: dict, search: dict[str, dict], stream: tuple[int, ...] = ()) -> optuna.samplers.BaseSampler:
    """The sweep file's sampler. A seeded one draws from the stream of its seed and `stream` (the worker's index and
    the trials the study held when it started): each worker, and each rerun of the sweep, its own draws, reproducible
    from the same history. Every worker with the seed alone drew the same points, and a rerun the first run's again."""
    options = dict(spec)
    name, seed = options.pop("name"), options.pop("seed", None)
    if seed is not None and any(stream):
        seed = int(np.random.SeedSequence([seed, *stream]).generate_state(1)[0])
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
