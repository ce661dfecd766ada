"""Reading a saved config (a run directory's config.yaml, a checkpoint's, a W&B run's): typed by the schema, completed
with the defaults of keys added since, and checked value by value against the schema's annotations; none of them
validated against the registries here.
"""

from __future__ import annotations

import math
from dataclasses import is_dataclass
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ablate.config.merge import merge, schema
from ablate.config.retired import without_retired
from ablate.config.schema import ExperimentConfig
from ablate.messages.errors import ConfigError


def rebuild(data: dict) -> ExperimentConfig:
    """A config saved in a checkpoint or run dir, typed by the schema (not validated here)."""
    return OmegaConf.to_object(merge(schema(), data, "saved config"))


def with_defaults(saved: dict) -> dict:
    """A saved config completed with the schema's defaults for keys added since it was written, so an old run's
    config compares equal to the same config loaded today (unvalidated: it is only compared, never trained on)."""
    saved = without_retired(saved, "saved config")
    try:
        return OmegaConf.to_container(OmegaConf.merge(schema(), saved))
    except OmegaConfBaseException:  # a key since removed or retyped: compare what was saved as it is
        return saved


def check_saved_types(saved: dict, source: str) -> None:
    """ConfigError naming `source` and the key when a saved run config gives a key the schema still has a value of
    another kind (a section replaced by a scalar, a list for a number). Keys since removed are an old run's and pass.
    Read off the schema's annotations, as OmegaConf would type them, without building a structured config: `ablate
    table` checks every run of a study, and a merge costs tens of milliseconds each."""
    _check_section(saved, ExperimentConfig, "", source)


def _check_section(data: dict, cls: type, prefix: str, source: str) -> None:
    hints = _hints(cls)
    for key, value in data.items():
        if key not in hints:
            continue
        kind, where = hints[key], f"{prefix}{key}"
        if is_dataclass(kind):
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: bad value for '{where}': a section of keys, got {value!r:.60}")
            _check_section(value, kind, f"{where}.", source)
        elif not _fits(value, kind):
            raise ConfigError(f"{source}: bad value for '{where}': {value!r:.60} is not {_kind_name(kind)}")


_HINTS: dict[type, dict] = {}


def _hints(cls: type) -> dict:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _fits(value: Any, kind: Any) -> bool:
    """Whether OmegaConf would take `value` for a field annotated `kind` (numbers and booleans also as their text)."""
    args = get_args(kind)
    if get_origin(kind) in (Union, UnionType):
        return any(_fits(value, a) for a in args)
    if kind is type(None):
        return value is None
    if get_origin(kind) is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if isinstance(value, (dict, list)) or value is None:
        return False
    if kind is bool:
        return isinstance(value, bool) or str(value).lower() in ("true", "false", "yes", "no", "on", "off", "1", "0")
    if kind is int:
        return not isinstance(value, bool) and _number(value, int)
    if kind is float:
        return not isinstance(value, bool) and _number(value, float)
    return kind is str


def _number(value: Any, kind: type) -> bool:
    if isinstance(value, (int, float)):
        return kind is float or isinstance(value, int) or (math.isfinite(value) and value == int(value))
    try:
        kind(str(value))
    except ValueError:
        return False
    return True


def _kind_name(kind: Any) -> str:
    name = str(kind).replace("typing.", "").replace("<class '", "").replace("'>", "")
    return {"int": "an integer", "float": "a number", "str": "text", "bool": "true or false"}.get(name, name)
