"""An experiment's config as every command loads it: composed by ablate.config (schema, YAML files, overrides), its
plugins imported, then checked against the schema's rules and what the registries hold, all problems in one
ConfigError. Above the model and the data, so the config package stays the ground floor that asks neither."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from ablate import plugins
from ablate.config import ConfigError, ExperimentConfig, compose, rebuild, to_dict
from ablate.config.validation import problems
from ablate.data.datasets import dataset_problems


def validate(cfg: ExperimentConfig) -> None:
    """Every rule `cfg` breaks, of the schema and of the registered variants and datasets, in one ConfigError."""
    from ablate.model.checks import model_problems  # torch (the registries' classes): here, so a bad flag costs none

    found = problems(cfg) + model_problems(cfg.model, cfg.data) + dataset_problems(cfg.data)
    if found:
        raise ConfigError("invalid config:\n  - " + "\n  - ".join(found))


def load_config(
    files: Iterable[str | os.PathLike] = (), overrides: Iterable[str] = (), *, named_in: str = "run", **sections: dict
) -> ExperimentConfig:
    """Schema defaults, then YAML files, then `sections` dicts, then dotlist overrides; plugins imported; validated.
    `named_in`: where the error for an unregistered variant says to name a plugin file ("run" or "sweep": a sweep
    row's config is loaded here too, and a sweep file names its plugins in other words; ablate.plugins.NAMED_IN)."""
    from ablate.evaluation.scores import bleu_problem  # sacreBLEU: here, as torch

    cfg = compose(files, overrides, **sections)
    cfg.plugins = plugins.load_plugins(cfg.plugins)
    cfg = _validated(cfg, lambda data: plugins.hint(data["model"], named_in))
    # What a run will score, asked before it trains, not at its first BLEU; a saved config (from_dict) loads without
    # it, so a checkpoint translates where its BLEU's tokenizer is not installed.
    if bleu := bleu_problem(cfg.data.tgt_lang):
        raise ConfigError(f"invalid config:\n  - {bleu}")
    return cfg


def from_dict(data: dict) -> ExperimentConfig:
    """Rebuild a config saved in a checkpoint or run dir (validated like any other). Its `plugins` are only a record:
    never imported here, so a saved file alone runs no code; the caller imports them (`--plugins`) first."""
    return _validated(rebuild(data), lambda saved: f"\n  ({plugins.needed('the saved config', saved)})")


def _validated(cfg: ExperimentConfig, explain: Callable[[dict], str]) -> ExperimentConfig:
    """validate(cfg); when it names a variant no registry holds, `explain(config dict)` says how to register it."""
    try:
        validate(cfg)
    except ConfigError as e:
        data = to_dict(cfg)
        raise ConfigError(f"{e}{explain(data)}" if plugins.unregistered(data["model"]) else str(e)) from None
    return cfg
