"""The one YAML reader for config and sweep files: safe loading, and every problem as a ConfigError naming the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ablate.errors import ConfigError


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader (no tags that construct Python objects) that refuses a key given twice in one mapping;
    plain PyYAML keeps the last one silently, so a sweep's second `params:` would drop the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` may be given beside keys it overrides
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                earlier = first_line.get(key)
            except TypeError:  # an unhashable key; SafeLoader's own error names it below
                continue
            if earlier is not None:
                lines = f"lines {earlier} and {line}" if earlier != line else f"line {line} (twice)"
                raise ConfigError(f"{self.name}: duplicate key '{key}' at {lines}")
            first_line[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | os.PathLike, what: str = "config file") -> Any:
    """The parsed contents of the YAML file at `path` (None when empty).

    Raises ConfigError for a missing file ("WHAT not found: PATH"), invalid YAML (file and line) and a key
    repeated in any mapping (the key and both lines)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    loader = _UniqueKeyLoader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        detail = "; ".join(part for part in (getattr(e, "context", None), getattr(e, "problem", None)) if part) or str(e)
        raise ConfigError(f"{path}: not valid (safe) YAML{where}: {detail}") from None
    finally:
        loader.dispose()
