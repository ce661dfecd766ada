"""Composing a config: schema defaults -> each YAML file -> `sections` dicts -> CLI dotlist overrides, merged by
OmegaConf (ablate.config.merge). Nothing here imports a plugin or asks a registry: that is
`ablate.experiment.load_config`, which every command uses, above the model and the data.

A plugin path is resolved relative to the YAML file naming it (from `sections` or the command line: to the cwd)
and kept absolute, so a saved config.yaml or a sweep's trial.yaml names the same files from anywhere. The data paths
(data.dir and the files prefixes) are kept as written, relative to the cwd: a project moved or checked out elsewhere
(a study continued on another machine) reads its own copy; a run's fingerprint.json records the files it read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path

from omegaconf import OmegaConf

from ablate.config.merge import merged, resolving, schema
from ablate.config.schema import ExperimentConfig
from ablate.files.yaml_file import read_yaml
from ablate.messages.errors import ConfigError

# The config's sections (model, data, train, ...): `model.heads` alone on a command line is an override without its '='
SECTIONS = frozenset(f.name for f in dataclasses.fields(ExperimentConfig) if dataclasses.is_dataclass(getattr(ExperimentConfig(), f.name)))


def _read_yaml(path: Path) -> dict:
    """A config file's sections; ablate.files.yaml_file refuses unsafe tags and duplicate keys."""
    if not Path(path).exists() and str(path).split(".", 1)[0] in SECTIONS and "/" not in str(path):
        # `model.heads 4`: an override missing its '=', read as a file name
        raise ConfigError(f"config file not found: {path} (an override is written KEY=VALUE, e.g. {path}=...)")
    data = read_yaml(path, "config file")
    if data is None:  # cut short, or the wrong file: it would train the schema's defaults, 48M parameters, 100,000 steps
        raise ConfigError(f"{path}: holds no settings (empty, or comments only); name an experiment file (experiments/*.yaml)")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a mapping of config sections, got {type(data).__name__}")
    return data


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


DATA_PATHS = ("dir", "train_prefix", "valid_prefix", "test_prefix")  # data.* keys naming files or folders


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
    cfg = merged(schema(), updates)
    with resolving(updates):  # an interpolation that cannot be resolved: named with its key and source
        cfg.plugins = [resolve_plugin(p) for p in cfg.plugins]
        if isinstance(cfg.out_dir, str) and cfg.out_dir.startswith("~"):  # as Lightning's checkpoints expand it: one run, one folder
            cfg.out_dir = os.path.expanduser(cfg.out_dir)
        return OmegaConf.to_object(cfg)
