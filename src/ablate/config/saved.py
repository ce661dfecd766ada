"""Reading a saved config (a run directory's config.yaml, a checkpoint's, a W&B run's): typed by the schema, completed
with the defaults of keys added since, and checked value by value by OmegaConf's own type rules (its nodes, through
ablate.config.field_types), none of them validated against the registries here. A run directory's own file is read by
`read_run_config` alone (a checkpoint's config is ablate.training.checkpoint.checkpoint_config).
"""

from __future__ import annotations

from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ablate.config.field_types import REFUSED, hints, node_value
from ablate.config.merge import merge, schema
from ablate.config.retired import without_retired
from ablate.config.schema import ExperimentConfig
from ablate.files.yaml_file import read_yaml
from ablate.messages.errors import ConfigError


def read_run_config(path: Path, *, whole: bool = False) -> dict:
    """A run's saved config.yaml: a ValueError naming the file when it is not a mapping of sections. `whole` (what
    `ablate table` counts a run by) also refuses one cut short, which would lose the row's name and seed (the last
    keys written) and tabulate under the folder's name, and one whose keys hold values of other kinds than the schema's."""
    config = read_yaml(path, "run config")
    if config is None and not whole:
        return {}
    if not isinstance(config, dict):
        raise ValueError(f"{path}: the run's saved config is damaged (a {type(config).__name__}, not a mapping of sections)")
    if whole:
        if not path.read_bytes().endswith(b"\n") or "out_dir" not in config:
            raise ValueError(f"{path}: cut short (ablate writes every section, then out_dir, and a line end); restore it")
        try:
            check_saved_types(config, str(path))
        except ConfigError as e:
            raise ValueError(str(e)) from None
    return config


def rebuild(data: dict, source: str = "saved config") -> ExperimentConfig:
    """A config saved in a checkpoint or run dir (or made from one, `source` naming it), typed by the schema (not
    validated here)."""
    return OmegaConf.to_object(merge(schema(), data, source))


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
    Each value goes through the OmegaConf node its field's annotation names, without building a structured config:
    `ablate table` checks every run of a study, and a merge costs tens of milliseconds each."""
    _check_section(saved, ExperimentConfig, "", source)


def _check_section(data: dict, cls: type, prefix: str, source: str) -> None:
    fields = hints(cls)
    for key, value in data.items():
        if key not in fields:
            continue
        kind, where = fields[key], f"{prefix}{key}"
        if is_dataclass(kind):
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: bad value for '{where}': a section of keys, got {value!r:.60}")
            _check_section(value, kind, f"{where}.", source)
        elif not _fits(value, kind):
            raise ConfigError(f"{source}: bad value for '{where}': {value!r:.60} is not {_kind_name(kind)}")


def _fits(value: Any, kind: Any) -> bool:
    """Whether OmegaConf takes `value` for a field annotated `kind`: a list element by element, a scalar by its node."""
    if get_origin(kind) is list:
        return isinstance(value, list) and all(_fits(v, get_args(kind)[0]) for v in value)
    return node_value(value, kind) is not REFUSED


def _kind_name(kind: Any) -> str:
    name = str(kind).replace("typing.", "").replace("<class '", "").replace("'>", "")
    return {"int": "an integer", "float": "a number", "str": "text", "bool": "true or false"}.get(name, name)
