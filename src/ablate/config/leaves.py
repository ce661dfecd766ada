"""Setting a few leaf keys of a composed config as OmegaConf's merge would, without a merge.

Composing a config (ablate.config.compose.compose) copies and merges the whole schema, about 15 ms; a sweep's row
changes two or three keys of its base. So a sweep composes its base once and sets each row's keys on a copy: each
value goes through the OmegaConf node its field's type names (IntegerNode, FloatNode, ...), which is what a merge
does to it, so "4" becomes 4 and 1 becomes 1.0 as before. Whatever this cannot set exactly (an unknown key, a
section, a list, an interpolation, a value its node refuses) returns None, and the caller composes in full, whose
error names the key.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import fields, is_dataclass
from typing import Any

from ablate.config.field_types import REFUSED, hints, node_value
from ablate.config.schema import ExperimentConfig


def with_leaves(cfg: ExperimentConfig, dotted: dict[str, Any]) -> ExperimentConfig | None:
    """A copy of `cfg` with each `section.key` of `dotted` set to its value as OmegaConf converts it (not validated);
    None when a key is not a scalar field of the schema or a value is not one OmegaConf takes as it is. The copy
    shares the sections (and lists) it does not set with `cfg`: read it, or copy it deeply before changing it."""
    values = []
    for key, value in dotted.items():
        where = _field(cfg, str(key))
        if where is None:
            return None
        converted = node_value(value, hints(type(where[0]))[where[1]])
        if converted is REFUSED:
            return None
        values.append((str(key), converted))
    out, copied = copy.copy(cfg), {}
    for key, value in values:
        owner = out
        for section in key.split(".")[:-1]:  # a section on the way copied once, the others shared with `cfg`
            path = f"{id(owner)}.{section}"
            if path not in copied:
                copied[path] = copy.copy(getattr(owner, section))
                setattr(owner, section, copied[path])
            owner = copied[path]
        setattr(owner, key.rsplit(".", 1)[-1], value)
    return out


def _field(cfg: Any, key: str) -> tuple[Any, str] | None:
    """(the dataclass holding the field, its name) for a dotted key naming a field that is no section."""
    *sections, name = key.split(".")
    owner = cfg
    for section in sections:
        owner = getattr(owner, section, None) if is_dataclass(owner) and section in _names(type(owner)) else None
        if owner is None:
            return None
    if not is_dataclass(owner) or name not in _names(type(owner)) or is_dataclass(getattr(owner, name)):
        return None
    return owner, name


@functools.cache
def _names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))
