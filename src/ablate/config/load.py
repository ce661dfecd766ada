"""Composing a config: schema defaults -> each YAML file -> `sections` dicts -> CLI dotlist overrides; and the ways a
config is saved (dict, YAML, flat dotted keys). Nothing here imports a plugin or asks a registry: that is
`ablate.experiment.load_config`, which every command uses, above the model and the data.

A plugin path is resolved relative to the YAML file naming it (from `sections` or the command line: to the cwd)
and kept absolute, so a saved config.yaml or a sweep's trial.yaml names the same files from anywhere.

OmegaConf rejects unknown keys and wrong types; `_friendly` turns its errors into ConfigErrors that name the key.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import os
from collections.abc import Iterable
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from ablate.config.schema import ExperimentConfig
from ablate.files.yaml_file import parse_yaml, read_yaml
from ablate.messages.errors import ConfigError
from ablate.messages.hints import did_you_mean

log = logging.getLogger(__name__)


def _valid_keys(schema: Any, prefix: str = "") -> list[str]:
    keys = []
    for f in fields(schema):
        value = getattr(schema, f.name)
        keys.append(prefix + f.name)
        if is_dataclass(value):
            keys += _valid_keys(value, prefix + f.name + ".")
    return keys


def _friendly(err: OmegaConfBaseException, source: str) -> ConfigError:
    """Turn an OmegaConf error into one that names the key, the value and what is allowed."""
    key = err.full_key or "?"
    if isinstance(err, ConfigKeyError) or "not in struct" in str(err) or "Key '" in str(err):
        valid = [k for k in _valid_keys(ExperimentConfig()) if k.count(".") == key.count(".")]
        same_leaf = [k for k in valid if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]  # the key in the wrong section
        hint = did_you_mean(key, same_leaf, cutoff=0.0) if same_leaf else did_you_mean(key, valid)
        return ConfigError(f"{source}: unknown config key '{key}'{hint}")
    if isinstance(err, ValidationError):
        msg = str(err).splitlines()[0]
        return ConfigError(f"{source}: bad value for '{key}': {msg}")
    return ConfigError(f"{source}: {err}")


def _read_yaml(path: Path) -> dict:
    """A config file's sections; ablate.files.yaml_file refuses unsafe tags and duplicate keys."""
    data = read_yaml(path, "config file")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a mapping of config sections, got {type(data).__name__}")
    return data


# Keys ablate no longer has -> why: dropped from files and saved configs, so a run that recorded one still loads.
RETIRED = {"train.debug_nan_step": "a test aid; tests inject faults through a plugin of their own"}


def without_retired(data: dict, source: str) -> dict:
    """`data` less the RETIRED keys; one set to anything but its old default (0) is named in a warning."""
    for dotted, why in RETIRED.items():
        section, key = dotted.split(".")
        if isinstance(data.get(section), dict) and key in data[section]:
            value = data[section][key]
            data = {**data, section: {k: v for k, v in data[section].items() if k != key}}
            if value not in (0, None):
                log.warning("%s: %s=%r is ignored: the key is retired (%s)", source, dotted, value, why)
    return data


def merge(base: Any, update: dict | list[str], source: str) -> Any:
    """Merge a nested dict or a dotlist (`model.heads=4`) onto a structured config."""
    try:
        return OmegaConf.merge(base, _as_config(update, source))
    except OmegaConfBaseException as e:
        raise _friendly(e, source) from None


def _as_config(update: dict | list[str], source: str) -> Any:
    if isinstance(update, dict):
        return OmegaConf.create(without_retired(update, source))
    for item in update:
        if "=" not in item:
            raise ConfigError(f"{source}: override '{item}' must look like key=value (e.g. model.heads=4)")
        parse_yaml(item.partition("=")[2], f"{source}: override '{item}'", lines=False)  # as a file's values are read
    try:
        return OmegaConf.from_dotlist(list(update))
    except yaml.YAMLError as e:  # what OmegaConf's own reader refuses beyond ours (its alias-expansion ratio)
        detail = str(e).splitlines()[0].split(". See ")[0]  # OmegaConf's advice (to lift its limit) is not the user's
        raise ConfigError(f"{source}: override {_culprit(update)}: refused: {detail}") from None


def _culprit(update: list[str]) -> str:
    """The first override OmegaConf's reader refuses, quoted (all of them where none alone is refused)."""
    for item in update:
        try:
            OmegaConf.from_dotlist([item])
        except yaml.YAMLError:
            return repr(item)
    return repr(" ".join(update))


def _merged(base: Any, updates: list[tuple[dict | list[str], str]]) -> Any:
    """`updates` (each with its source) merged onto `base` in one pass: OmegaConf copies the base once per merge, and
    a sweep composes a config per row. Where that fails, one at a time, so the error names the source at fault."""
    try:
        return OmegaConf.merge(base, *(_as_config(update, source) for update, source in updates))
    except OmegaConfBaseException:
        for update, source in updates:
            base = merge(base, update, source)
        return base


@functools.cache
def _schema_once() -> Any:
    return OmegaConf.structured(ExperimentConfig)


def _schema() -> Any:
    """A fresh structured config of the schema's defaults: a copy of one built once (building one reads every field
    of every dataclass, several times slower than the copy, and a sweep composes one per row)."""
    return copy.deepcopy(_schema_once())


def _plugin_paths(data: dict, path: Path) -> dict:
    """A config file's `plugins` (a list, or one name) with file paths made absolute relative to the file's folder."""
    named = data.get("plugins")
    if named is None:
        return data
    named = [named] if isinstance(named, str) else named
    if not isinstance(named, list) or not all(isinstance(p, str) for p in named):
        raise ConfigError(f"{path}: plugins must be a list of .py files or module names, got {data['plugins']!r}")
    return {**data, "plugins": [resolve_plugin(p, path.parent) for p in named]}


def is_plugin_file(spec: str) -> bool:
    """Whether a plugin spec names a file (`x.py`, `dir/x`) rather than a module (`pkg.mod`)."""
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def resolve_plugin(spec: str, base: str | os.PathLike | None = None) -> str:
    """A file spec as an absolute path (relative to `base`, default the cwd); a module name as it is."""
    spec = str(spec).strip()
    if not is_plugin_file(spec):
        return spec
    return str((Path(base or Path.cwd()) / Path(spec).expanduser()).resolve())


def _one_plugin_as_list(override: str) -> str:
    """`plugins=x.py` means `plugins=[x.py]` (and needs no brackets, which some shells glob)."""
    key, _, value = override.partition("=")
    return f"plugins=[{value}]" if key.strip() == "plugins" and not value.lstrip().startswith("[") else override


def compose(files: Iterable[str | os.PathLike] = (), overrides: Iterable[str] = (), **sections: dict) -> ExperimentConfig:
    """Schema defaults, then YAML files, then `sections` dicts, then dotlist overrides; plugin files named absolutely
    (those from `sections` or the command line relative to the cwd). Neither imported nor validated here."""
    updates = [(_plugin_paths(_read_yaml(Path(path)), Path(path)), str(path)) for path in files]
    if sections:
        updates.append((sections, "overrides"))
    if overrides := [_one_plugin_as_list(o) for o in overrides]:
        updates.append((overrides, "command line"))
    cfg = _merged(_schema(), updates)
    cfg.plugins = [resolve_plugin(p) for p in cfg.plugins]
    return OmegaConf.to_object(cfg)


def rebuild(data: dict) -> ExperimentConfig:
    """A config saved in a checkpoint or run dir, typed by the schema (not validated here)."""
    return OmegaConf.to_object(merge(_schema(), data, "saved config"))


def to_dict(cfg: ExperimentConfig) -> dict:
    return asdict(cfg)


def to_yaml(cfg: ExperimentConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.create(to_dict(cfg)))  # the text a structured config gives, without building one


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """{'model': {'heads': 8}} -> {'model.heads': 8}; for diffs and W&B config."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def with_defaults(saved: dict) -> dict:
    """A saved config completed with the schema's defaults for keys added since it was written, so an old run's
    config compares equal to the same config loaded today (unvalidated: it is only compared, never trained on)."""
    saved = without_retired(saved, "saved config")
    try:
        return OmegaConf.to_container(OmegaConf.merge(_schema(), saved))
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


def diff(before: dict, after: dict, ignore: tuple[str, ...] = ()) -> dict[str, tuple[Any, Any]]:
    """Flattened keys whose values differ, key -> (before, after), leaving out keys that start with an `ignore` prefix."""
    a, b = flatten(before), flatten(after)
    missing = object()  # a key absent on one side differs even from a None on the other
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k, missing) != b.get(k, missing) and not k.startswith(ignore)}
