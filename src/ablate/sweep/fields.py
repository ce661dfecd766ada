"""The type and range checks of a sweep file's values, each error naming the file and the key (`ablate.sweep.load`
reads the file and applies them)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ablate.config import ConfigError
from ablate.files.yaml_file import key_line
from ablate.messages.hints import did_you_mean
from ablate.sweep.options import SEED_MAX, is_number, is_seed


def given(raw: dict, key: str, default: Any) -> Any:
    """The key's value; `default` when it is absent or empty (`key:` alone in YAML)."""
    return default if raw.get(key) is None else raw[key]


def fail(path: Path, msg: str) -> ConfigError:
    return ConfigError(f"{path}: {msg}")


def check_keys(path: Path, where: str, got: dict, allowed: set[str], at: str | None = None) -> None:
    """Refuse every key of `got` not `allowed` at once, each with a hint and, where the mapping's dotted place in the
    file is `at` ("" for the top), its line."""
    said = []
    for key in (k for k in got if k not in allowed):
        # a config key at the top of the file: it belongs to every trial, so in `overrides`
        hint = (
            f" (a config key for every trial goes in overrides: {{{key}: ...}})"
            if key in ("plugins", "seed", "out_dir") and "overrides" in allowed and key not in allowed
            else did_you_mean(key, allowed)
        )
        line = key_line(path, f"{at}.{key}" if at else str(key)) if at is not None else None
        said.append(f"unknown key '{key}' in {where}{hint}" + (f" at line {line}" if line else ""))
    if said:
        raise fail(path, "; ".join(said) + f"; allowed: {sorted(allowed)}")


def mapping(path: Path, raw: dict, key: str, example: str) -> dict:
    """The key's mapping ({} when absent or empty)."""
    value = given(raw, key, {})
    if not isinstance(value, dict):
        raise fail(path, f"{key} must be a mapping, e.g. {example}; got {value!r}")
    return value


def count(path: Path, key: str, value: Any, most: int | None = None) -> Any:
    """n_trials, workers, gpus_per_trial: an integer >= 1 (0 or less would run an empty study, `true` is not 1), and
    at most `most` where given (workers: each is a process)."""
    if value is not None and (not is_number(value) or not isinstance(value, int) or value < 1):
        raise fail(path, f"{key}={value!r} must be an integer >= 1")
    if value is not None and most is not None and value > most:
        raise fail(path, f"{key}={value!r} must be at most {most}")
    return value


def seconds(path: Path, key: str, value: Any) -> Any:
    """timeout: a finite number of seconds > 0 (-1 would stop the study at once, .nan never)."""
    if value is not None and (not is_number(value) or not math.isfinite(value) or value <= 0):
        raise fail(path, f"{key}={value!r} must be a number of seconds > 0 (leave it out for no time limit)")
    return value


def text(path: Path, key: str, value: Any, secret: bool = False) -> Any:
    """A string; a `secret` one (storage: a URL with its password, given as a mapping or list by mistake) is never
    echoed, only its type named."""
    if value is not None and not isinstance(value, str):
        got = f"a {type(value).__name__} (not shown: it may hold a password)" if secret else repr(value)
        raise fail(path, f"{key} must be a string, got {got}")
    return value


def seeds(path: Path, where: str, raw: Any) -> list[int]:
    """A list of distinct seeds; an empty list is an error (a grid with no seed would run no trial), an absent key is []."""
    seeds = [] if raw is None else raw
    if not isinstance(seeds, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise fail(path, f"{where} must be a list of integers, got {raw!r}")
    if raw == []:
        raise fail(path, f"{where}: [] lists no seed; give at least one, or leave {where} out")
    for s in seeds:
        if not is_seed(s):
            raise fail(path, f"{where} lists {s}: a seed must be from 0 to {SEED_MAX}")
    if len(set(seeds)) != len(seeds):
        raise fail(path, f"{where} lists a seed twice: {seeds}")
    return seeds


def row_seeds(path: Path, raw: dict) -> dict[str, list[int]]:
    """`row_seeds: {base: [1, 2, 3, 4, 5]}`: rows run with seeds of their own instead of `seeds`."""
    given = raw.get("row_seeds") or {}
    if not isinstance(given, dict):
        raise fail(path, f"row_seeds must map variant names to seed lists, got {given!r}")
    rows = raw.get("variants") or {}
    for row in given:
        if row not in rows:
            raise fail(path, f"row_seeds names '{row}', which is not a variant{did_you_mean(str(row), set(map(str, rows)))}")
    return {str(row): seeds(path, f"row_seeds.'{row}'", listed) for row, listed in given.items()}


def seed_overridden(where: str, overrides: dict, seeds: list[int], row: str | None = None) -> str | None:
    """Why a `seed` among a row's (or the sweep-wide) overrides is refused: the row trains once per seed of `seeds`
    (its row_seeds, else the sweep's), each replacing it, so it was silently ignored; None where no seeds apply."""
    if "seed" not in overrides or not seeds:
        return None
    fix = f"give the row seeds of its own with row_seeds: {{{row}: [{overrides['seed']}]}}" if row else "remove one of them"
    return f"{where}: seed {overrides['seed']!r} would be replaced by each of the seeds {seeds}, so it changes nothing; {fix}"
