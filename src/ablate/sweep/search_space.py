"""A sweep file's search space (`search:`): each key's spec checked before Optuna sees it (its type, a categorical's
choices, a range's bounds), each error naming the file and the key, and the values a check composes for it, so a
choice or bound no config can take fails the dry run, not a trial."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from ablate.config import ConfigError
from ablate.sweep import fields
from ablate.sweep.options import is_number

PARAM_TYPES = {"categorical", "int", "float"}
MAX_CORNERS = 256  # combinations of the other keys' values a value failing alone is tried with before it is refused
# Keys each trial's config gets from the study (ablate.sweep.trial_config): searched or set by a row, they change nothing.
STUDY_SET = ("out_dir", "logging.name", "logging.group", "logging.progress", "sweep.")


def check_search(path: Path, raw: dict) -> dict[str, dict]:
    """The search space as written, once each key's spec is one Optuna can draw from."""
    for key, spec in raw.items():
        where = f"search.'{key}'"
        if str(key).startswith((*STUDY_SET, "members.")):  # a row's members.size is its group size; a draw's, nothing
            raise fields.fail(path, f"{where}: each trial's {key} is the study's to set, so searching it would change nothing")
        if not isinstance(spec, dict) or spec.get("type") not in PARAM_TYPES:
            raise fields.fail(path, f"{where} needs type: one of {sorted(PARAM_TYPES)}")
        fields.check_keys(path, where, spec, {"type", "choices", "low", "high", "log", "step"})
        _check_bounds(path, where, spec)
        if spec["type"] == "categorical":
            _check_choices(path, where, spec.get("choices"))
        else:
            if "low" not in spec or "high" not in spec or not spec["low"] < spec["high"]:
                raise fields.fail(path, f"{where} ({spec['type']}) needs low < high, got low={spec.get('low')} high={spec.get('high')}")
            if spec.get("log") and spec["low"] <= 0:
                raise fields.fail(path, f"{where} has log: true, so low must be > 0 (got {spec['low']})")
            if spec.get("log") and spec.get("step") and (spec["type"] == "float" or spec["step"] != 1):
                raise fields.fail(path, f"{where}: Optuna cannot combine log: true with step: {spec['step']}; drop one of them")
    return raw


def _check_choices(path: Path, where: str, choices: Any) -> None:
    """A non-empty list of single values (a number, text, true or false, null), as Optuna's categorical takes: a string
    was drawn from letter by letter, a number or a mapping stopped the load on a TypeError or KeyError."""
    if not isinstance(choices, list) or not choices:
        raise fields.fail(path, f"{where} (categorical) needs a non-empty 'choices' list, e.g. choices: [1, 2, 4]; got {choices!r:.60}")
    if bad := [c for c in choices if c is not None and not isinstance(c, (str, int, float))]:
        raise fields.fail(path, f"{where}.choices: {bad[0]!r:.60} is not a single value (a number, text, true or false, or null)")
    same = [("number", float(c)) if isinstance(c, (int, float)) and not isinstance(c, bool) else (type(c).__name__, c) for c in choices]
    twice = [c for i, c in enumerate(choices) if same[i] in same[:i]]  # 0 and 0.0 are one value to a config
    if twice:  # a sampler would draw it twice as often as the others
        raise fields.fail(path, f"{where}.choices lists {twice[0]!r:.60} twice; list each choice once")


def _check_bounds(path: Path, where: str, spec: dict) -> None:
    """low, high and step finite numbers (integers for an int parameter), step > 0, log true or false."""
    for key in ("low", "high", "step"):
        value = spec.get(key)
        if value is None:
            continue
        if not is_number(value) or not math.isfinite(value):
            raise fields.fail(path, f"{where}.{key}={value!r} must be a finite number")
        if spec["type"] == "int" and not isinstance(value, int):
            raise fields.fail(path, f"{where}.{key}={value!r} must be an integer (the parameter is int)")
    if spec.get("step") is not None and spec["step"] <= 0:
        raise fields.fail(path, f"{where}.step={spec['step']!r} must be > 0")
    if "log" in spec and not isinstance(spec["log"], bool):
        raise fields.fail(path, f"{where}.log={spec['log']!r} must be true or false")


def probes(spec: dict) -> list:
    """The values a check composes a search key at: every choice of a categorical, both ends of a range. With a step,
    the top end is the last value on its grid, as Optuna draws it (low 1, high 6, step 3: 1 and 4, never 6)."""
    if spec["type"] == "categorical":
        return list(spec["choices"])
    low, high, step = spec["low"], spec["high"], spec.get("step")
    if step:
        high = low + math.floor((high - low) / step + 1e-9) * step
    return [low, int(high) if spec["type"] == "int" else high]


def search_override(key: str, spec: dict, value: Any) -> dict:
    """The override a search key gives at `value`, as a trial would get it (an int parameter as an int)."""
    return {key: int(value) if spec["type"] == "int" else value}


def value_problem(sweep, key: str, spec: dict) -> str | None:
    """Why a value `key` may draw (any choice, either bound) makes no config a trial can run, or None. One that fails
    on the base alone is tried with the other searched keys' values (each choice and bound, at most MAX_CORNERS
    combinations): heads 3 on a base of d_model 64 runs beside a searched d_model 96; `a` for a number never does."""
    others = [[search_override(k, s, v) for v in probes(s)] for k, s in sweep.search.items() if k != key]
    for value in probes(spec):
        drawn = search_override(key, spec, value)
        try:
            sweep.row_config(drawn)
            continue
        except ConfigError as e:
            alone = e
        corners = itertools.islice(itertools.product(*others), MAX_CORNERS)
        if not any(_composes(sweep, {k: v for part in corner for k, v in part.items()} | drawn) for corner in corners):
            return f"search.'{key}'={value!r}: {alone}"
    return None


def _composes(sweep, overrides: dict) -> bool:
    try:
        sweep.row_config(overrides)
        return True
    except ConfigError:
        return False
