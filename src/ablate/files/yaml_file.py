"""The one YAML reader for config and sweep files: safe loading, and every problem as a ConfigError naming the file.

Besides invalid YAML, unsafe tags and duplicate keys, it refuses what loads cheaply but blows up whoever walks the
result (OmegaConf copies every value): aliases that expand to more than MAX_VALUES values ("billion laughs"), an
alias inside its own anchor, and nesting deeper than MAX_DEPTH, which no config or sweep file needs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from ablate.messages.errors import ConfigError

MAX_VALUES = 100_000  # values in the document with every alias expanded; a whole Table 3 sweep file holds a few hundred
MAX_DEPTH = 64  # nested mappings and lists; configs hold 3 levels, sweep files 5
_STR, _NUMBERS = "tag:yaml.org,2002:str", ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
# An exponent without a dot (`1e-3`, `5E4`): a number to YAML 1.2 and OmegaConf, text to PyYAML's YAML 1.1.
_EXPONENT = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")


# libyaml's parser where PyYAML was built with it (several times faster: `ablate table` reads every run's config),
# else the pure-Python one; the safe constructor either way.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):
    """SafeLoader (no tags that construct Python objects) that refuses a key given twice in one mapping;
    plain PyYAML keeps the last one silently, so a sweep's second `params:` would drop the first."""

    def resolve(self, kind: type, value: str, implicit: tuple[bool, bool]) -> str:
        """PyYAML's YAML 1.1 numbers with two changes, as YAML 1.2 reads them: base-60 is text, so `1:00:00:00`
        (train.max_time's "[DD:]HH:MM:SS") is a day, not 216000 seconds; and an exponent without a dot (`1e-3`) is a
        number, as OmegaConf reads it on a command line, where it was text in a file (a sweep's choices, a member
        list, an objective's weight: values no schema types). A key stays as YAML 1.1 reads it (construct_mapping)."""
        tag = super().resolve(kind, value, implicit)
        if tag in _NUMBERS and ":" in value:  # no other YAML 1.1 number holds a colon
            return _STR
        if tag == _STR and implicit[0] and kind is yaml.ScalarNode and _EXPONENT.fullmatch(value):
            return _NUMBERS[1]
        return tag

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` may be given beside keys it overrides
                continue
            if key_node.tag == _NUMBERS[1] and _EXPONENT.fullmatch(str(key_node.value)):
                key_node.tag = _STR  # a row named `1e-3` stays its name
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


# A date or time (`2024-12-01`, implicit or tagged) is read as the text it is, as YAML 1.2 reads it: no config or sweep
# value holds a date, and OmegaConf refused one ("Value 'date' is not a supported primitive type") naming no key or file.
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp", _UniqueKeyLoader.construct_yaml_str)


def read_yaml(path: str | os.PathLike, what: str = "config file") -> Any:
    """The parsed contents of the YAML file at `path` (None when empty).

    Raises ConfigError for a missing file ("WHAT not found: PATH"), invalid YAML (file and line) and a key
    repeated in any mapping (the key and both lines)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    except IsADirectoryError:  # `ablate sweep runs/sweeps/x`: a study's folder where its sweep file belongs
        raise ConfigError(f"{path} is a folder, not a {what} (a .yaml file)") from None
    return parse_yaml(_utf8(data, path), str(path))


def key_line(path: str | os.PathLike, dotted: str) -> int | None:
    """The line of `dotted` (`model.heads`: the key `heads` in the mapping `model`, or a key written whole as
    `model.heads:`) in the YAML file at `path`, for an error about that key; None where the file or the key cannot be
    found (the error then names the file alone)."""
    found = _key_node(path, dotted)
    return found[0] if found else None


def key_text(path: str | os.PathLike, dotted: str) -> str | None:
    """The value of `dotted` in the YAML file at `path` as it is written there (`1e3`, where the parsed value is
    1000.0), for an error that quotes what was typed; None where it is not one scalar or cannot be found."""
    found = _key_node(path, dotted)
    return found[1].value if found and isinstance(found[1], yaml.ScalarNode) else None


def _key_node(path: str | os.PathLike, dotted: str) -> tuple[int, yaml.Node] | None:
    """The line of the key `dotted` (nested, or written whole) and the node of its value."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=_SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    for parts in (dotted.split("."), [dotted]):
        node, line = root, None
        for part in parts:
            pairs = node.value if isinstance(node, yaml.MappingNode) else []
            found = next(((k, v) for k, v in pairs if isinstance(k, yaml.ScalarNode) and k.value == part), None)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        else:
            return (line, node) if line is not None else None
    return None


def parse_yaml(text: str, name: str, lines: bool = True) -> Any:
    """`text` parsed as read_yaml parses a file, each error starting with `name` (a file, or a command line's
    override, whose value is one line: `lines=False` leaves line numbers out of its errors)."""
    loader = _UniqueKeyLoader(text)
    loader.name = name
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, name)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        if "maximum nesting depth" in str(getattr(e, "problem", "")):  # libyaml's own limit, past any MAX_DEPTH
            raise ConfigError(f"{name}: nested too deeply to read (more than {MAX_DEPTH} levels of mappings and lists)") from None
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None and lines else ""
        detail = "; ".join(part for part in (getattr(e, "context", None), getattr(e, "problem", None)) if part) or str(e)
        raise ConfigError(f"{name}: not valid (safe) YAML{where}: {detail}") from None
    except RecursionError:  # the parser itself recurses once per level
        raise ConfigError(f"{name}: nested too deeply to read (more than {MAX_DEPTH} levels of mappings and lists)") from None
    finally:
        loader.dispose()


def _utf8(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ConfigError(f"{path}: not UTF-8 text at line {line}, column {column} (bytes {data[e.start : e.start + 4]!r})") from None


def _check_size(root: yaml.Node, path: str) -> None:
    """Refuse a document whose aliases expand past MAX_VALUES values, that nests past MAX_DEPTH, or whose alias
    stands inside its own anchor: each node's expanded size is counted once (aliases share their node)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        line = node.start_mark.line + 1
        if depth > MAX_DEPTH:
            raise ConfigError(f"{path}: nested more than {MAX_DEPTH} levels deep at line {line}; no config or sweep file needs that")
        if id(node) in open_nodes:
            raise ConfigError(f"{path}: the value anchored at line {line} holds an alias of itself (a loop no config can hold)")
        open_nodes.add(id(node))
        children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else node.value
        total = 1 + (sum(size(c, depth + 1) for c in children) if isinstance(node, yaml.CollectionNode) else 0)
        open_nodes.discard(id(node))
        if total > MAX_VALUES:
            raise ConfigError(
                f"{path}: its aliases (*name) expand to more than {MAX_VALUES:,} values (at line {line}); "
                "refusing it, as walking it would take the memory of a YAML alias bomb"
            )
        sizes[id(node)] = total
        return total

    size(root, 0)
