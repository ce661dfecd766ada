"""A config as plain data: a dict, YAML text, flat dotted keys (for W&B and diffs), and the difference of two by
those keys."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from omegaconf import OmegaConf

from ablate.config.schema import ExperimentConfig


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


def diff(before: dict, after: dict, ignore: tuple[str, ...] = ()) -> dict[str, tuple[Any, Any]]:
    """Flattened keys whose values differ, key -> (before, after), leaving out keys that start with an `ignore` prefix."""
    a, b = flatten(before), flatten(after)
    missing = object()  # a key absent on one side differs even from a None on the other
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k, missing) != b.get(k, missing) and not k.startswith(ignore)}
