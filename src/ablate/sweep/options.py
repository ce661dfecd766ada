"""A sweep file's pruner and sampler settings (`pruner: {name: median, n_startup_trials: 5}`), checked against the
Optuna class they build before any trial starts. Optuna checks some settings itself and lets others through (a
negative `n_startup_trials` of TPE, `interval_steps: true`, an infinite `n_warmup_steps`), which then misbehave, or
fail inside every trial; here each is an error naming the key."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from ablate.config.validation import SEED_MAX
from ablate.messages.hints import did_you_mean

# Settings with a least value above 0, where Optuna does not check it: 1 for a count of steps, trials or candidates,
# 2 for a reduction factor (1 would keep every trial in every rung).
MINIMUM = {"interval_steps": 1, "n_min_trials": 1, "min_resource": 1, "reduction_factor": 2, "n_ei_candidates": 1, "popsize": 1}


def is_number(value: Any) -> bool:
    """An int or float from YAML; a bool is not one (`true` would otherwise count as 1)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_seed(value: Any) -> bool:
    return is_number(value) and isinstance(value, int) and 0 <= value <= SEED_MAX


def component_problem(kind: str, spec: dict, build: Callable[[dict], Any]) -> str | None:
    """What is wrong with the settings of `spec` (`kind` is 'pruner' or 'sampler'), or None; `build` makes the Optuna
    object from a spec. The type a setting must have is read from its default in the class's signature."""
    name = spec["name"]
    try:
        params = inspect.signature(type(build({"name": name})).__init__).parameters
    except (TypeError, ValueError) as e:
        return f"{kind} '{name}': {e}"
    allowed = {p for p in params if p != "self"} - {"search_space"}
    for key, value in spec.items():
        if key == "name":
            continue
        if key not in allowed:
            return f"{kind} '{name}' has no setting '{key}'{did_you_mean(key, allowed)}; it takes: {sorted(allowed)}"
        problem = _value_problem(key, value, params[key].default)
        if problem:
            return f"{kind}.{key}={value!r} {problem}"
    try:
        build(dict(spec))
    except (TypeError, ValueError) as e:  # Optuna's own checks (e.g. a negative n_startup_trials of the median pruner)
        return f"{kind} '{name}': {e}"
    return None


def _value_problem(key: str, value: Any, default: Any) -> str | None:
    if key == "seed":
        return None if is_seed(value) else f"must be an integer from 0 to {SEED_MAX}"
    if isinstance(value, float) and not math.isfinite(value):
        return "must be finite"
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "must be true or false"
    numeric = is_number(default) or key in MINIMUM
    if not numeric:
        return None  # a choice, a callable's name or a nested mapping: Optuna's constructor judges it
    if isinstance(value, str) and not is_number(default):
        return None  # e.g. min_resource: auto
    if not is_number(value):
        return "must be a number"
    if isinstance(default, int) and not isinstance(default, bool) and not isinstance(value, int):
        return "must be an integer"
    least = MINIMUM.get(key, 0 if not is_number(default) or default >= 0 else None)
    if least is not None and value < least:
        return f"must be >= {least}"
    return None
