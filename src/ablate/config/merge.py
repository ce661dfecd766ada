"""Merging onto the schema with OmegaConf, which rejects unknown keys and wrong types itself: a nested dict or a
dotlist (`model.heads=4`) onto a structured config, several in one pass, and OmegaConf's errors turned into
ConfigErrors that name the source, the key, the value and what is allowed (`_friendly`)."""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import re
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any, get_args

from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, GrammarParseError, InterpolationResolutionError, OmegaConfBaseException, ValidationError
from omegaconf.nodes import Node

from ablate.config.field_types import hints
from ablate.config.retired import without_retired
from ablate.config.schema import ExperimentConfig
from ablate.files.yaml_file import key_line, key_text, parse_yaml
from ablate.messages.errors import ConfigError
from ablate.messages.hints import did_you_mean


def _valid_keys(schema: Any, prefix: str = "") -> list[str]:
    keys = []
    for f in fields(schema):
        value = getattr(schema, f.name)
        keys.append(prefix + f.name)
        if is_dataclass(value):
            keys += _valid_keys(value, prefix + f.name + ".")
    return keys


def _unknown_key(key: str, source: str) -> str:
    """ "SOURCE: unknown config key 'KEY' at line N (did you mean ...?)", the line where SOURCE is a file; a dotted key
    written inside a file says how a file nests it."""
    line = key_line(source, key) if os.path.isfile(source) else None
    named = f"'{key}'" + (f" at line {line}" if line else "")
    every = _valid_keys(ExperimentConfig())
    if key in every:  # `model.heads: 2` in a file: one key named "model.heads"
        section, _, leaf = key.rpartition(".")
        return f"{source}: unknown config key {named}: a file nests its keys ({section}: {{{leaf}: ...}}); dotted keys are for the command line and a sweep's rows"
    valid = [k for k in every if k.count(".") == key.count(".")]
    # the key in the wrong section, or in none (`heads=4` for model.heads)
    same_leaf = [k for k in every if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]
    hint = did_you_mean(key, same_leaf, cutoff=0.0) if same_leaf else did_you_mean(key, valid)
    return f"{source}: unknown config key {named}{hint}"


def _unknown_keys(tree: dict, schema: Any, prefix: str = "") -> list[str]:
    """The keys of `tree` (nested dicts) that the schema dataclass `schema` lacks, dotted."""
    known = {f.name: getattr(schema, f.name) for f in fields(schema)}
    out = []
    for key, value in tree.items():
        if str(key) not in known:
            out.append(f"{prefix}{key}")
        elif is_dataclass(known[str(key)]) and isinstance(value, dict):
            out += _unknown_keys(value, known[str(key)], f"{prefix}{key}.")
    return out


def _friendly(err: OmegaConfBaseException, source: str, typed: str | None = None) -> ConfigError:
    """Turn an OmegaConf error into one that names the key (and its line, in a file), the value and what is allowed;
    `typed`: the value as written, where known (`1e3`, which OmegaConf saw as 1000.0)."""
    key = err.full_key or "?"
    if isinstance(err, ConfigKeyError) or "not in struct" in str(err) or "Key '" in str(err):
        return ConfigError(_unknown_key(key, source))
    if isinstance(err, ValidationError):
        return ConfigError(f"{source}: bad value for '{key}'{_at_line(source, key)}: {_plain(err, typed)}")
    return ConfigError(f"{source}: {err}")


def _at_line(source: str, key: str) -> str:
    """ " at line N" where `source` is a file holding `key` (`train.betas[0]`: the line of train.betas), else ""."""
    line = key_line(source, _INDEX.sub("", key)) if os.path.isfile(source) else None
    return f" at line {line}" if line else ""


_TYPE_WORDS = {"Integer": "a whole number", "Float": "a number", "String": "a word or text", "Boolean": "true or false"}
_GIVEN_WORDS = {"ListConfig": "a list", "DictConfig": "a section of keys"}
_INDEX = re.compile(r"\[\d+\]")
_NOT_CONVERTED = re.compile(r"Value '(?P<value>.*)' of type '(?P<type>\w+)' could not be converted to (?P<to>\w+)")
_NOT_BOOL = re.compile(r"Value '(?P<value>.*)' is not a valid bool")
_NOT_TEXT = re.compile(r"Cannot convert '(?P<type>\w+)' to string: .*")
_NOT_LIST = "is not a ListConfig, TupleConfig, list, or tuple"
_NONE = ("Incompatible value 'None' for field", "is not Optional", "NoneType is not a subclass")


def _plain(err: ValidationError, typed: str | None = None) -> str:
    """OmegaConf's "Value 'three' of type 'str' could not be converted to Integer" -> "'three' is not a whole number"
    (quoting `typed`, what was written, where known); a list or a section where one value goes, one value where a
    list goes and an empty value say so. Any other message as OmegaConf wrote it."""
    message = str(err).splitlines()[0]
    value = err.value._value() if isinstance(err.value, Node) else err.value
    text = typed if typed is not None else str(value)
    if m := _NOT_CONVERTED.fullmatch(message):
        wanted = _TYPE_WORDS.get(m["to"], m["to"])
        given = _GIVEN_WORDS.get(m["type"])
        return f"{m['value']} is {given}, where one value goes ({wanted})" if given else f"'{typed or m['value']}' is not {wanted}"
    if m := _NOT_BOOL.match(message):
        return f"'{typed or m['value']}' is not true or false"
    if m := _NOT_TEXT.fullmatch(message):
        return f"{value} is {_GIVEN_WORDS.get(m['type'], m['type'])}, where one value goes (a word or text)"
    if _NOT_LIST in message:
        return f"'{text}' is not a list (write [{text}])"
    if value is None and any(part in message for part in _NONE):  # also one item of a list ([0.9, null])
        return f"an empty value, where {_takes(err.full_key or '')} goes (give one)"
    return message


def _takes(key: str) -> str:
    """What the schema key `key` takes, in words ("a whole number", "a list", "a section of keys"); an item of a list
    (`train.betas[1]`), what the list holds ("a number")."""
    *path, leaf = _INDEX.sub("", key).split(".")
    parent: Any = ExperimentConfig()
    for part in path:
        parent = getattr(parent, part, None)
    node = getattr(parent, leaf, None)
    if is_dataclass(node):
        return "a section of keys"
    if isinstance(node, (list, tuple)):
        if not key.endswith("]"):
            return "a list"
        node = (get_args(hints(type(parent))[leaf]) or (None,))[0]
    kind = node if isinstance(node, type) else type(node)
    names = {bool: "Boolean", int: "Integer", float: "Float", str: "String"}
    return _TYPE_WORDS.get(names.get(kind, ""), "a value")


def merge(base: Any, update: dict | list[str], source: str) -> Any:
    """Merge a nested dict or a dotlist (`model.heads=4`) onto a structured config."""
    config = _as_config(update, source)
    try:
        return OmegaConf.merge(base, config)
    except (OmegaConfBaseException, TypeError) as e:  # TypeError: a section of keys onto a list (logging.tags={a: 1})
        shape = _wrong_shape(OmegaConf.to_container(config), source)
        if shape or not isinstance(e, OmegaConfBaseException):
            raise (shape or ConfigError(f"{source}: {e}")) from None
        raise _friendly(e, source, _typed(update, source, e.full_key)) from None


def _typed(update: dict | list[str], source: str, key: str | None) -> str | None:
    """The value of `key` as it was written: in a dotlist (`train.max_steps=1e3`), or in the file `source` names."""
    if not key:
        return None
    if isinstance(update, list):
        written = {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in update)}
        return written.get(key)
    return key_text(source, key) if os.path.isfile(source) else None


def _wrong_shape(update: dict, source: str, schema: Any = None, prefix: str = "") -> ConfigError | None:
    """`members: 3` (or `model=3`): OmegaConf's error names no key ('?'). Name the section and what it holds. And a
    section of keys where a list goes (`logging.tags={a: 1}`), which OmegaConf refuses with a bare TypeError."""
    schema = ExperimentConfig() if schema is None else schema
    for key, value in update.items():
        section = getattr(schema, str(key), None)
        if isinstance(section, list) and isinstance(value, dict):
            named = f"{prefix}{key}"
            return ConfigError(
                f"{source}: bad value for '{named}'{_at_line(source, named)}: {value} is a section of keys, where a list goes"
            )
        if not is_dataclass(section):
            continue
        if isinstance(value, dict):
            if found := _wrong_shape(value, source, section, f"{prefix}{key}."):
                return found
        elif value is not None:
            keys = [f.name for f in fields(section)]
            return ConfigError(
                f"{source}: '{prefix}{key}' is a section ({', '.join(keys)}), given the value {value!r}: set one of its keys, "
                f"e.g. {prefix}{key}.{keys[0]}" + (" (or --members K on the command line)" if f"{prefix}{key}" == "members" else "")
            )
    return None


def _list_in_list(update: dict, source: str, schema: Any = None, prefix: str = "") -> None:
    """Refuse a list or section as an item of a list of values (`train.betas=[[1, 2], 3]`): OmegaConf takes it, and
    the run failed later on a bare TypeError."""
    schema = ExperimentConfig() if schema is None else schema
    for key, value in update.items():
        section, named = getattr(schema, str(key), None), f"{prefix}{key}"
        if is_dataclass(section) and isinstance(value, dict):
            _list_in_list(value, source, section, f"{named}.")
        elif isinstance(section, list) and isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
            item = next(v for v in value if isinstance(v, (list, dict)))
            raise ConfigError(
                f"{source}: bad value for '{named}'{_at_line(source, named)}: {value} has {item} as an item, "
                f"where each item is {_takes(named + '[0]')}"
            )


def _as_config(update: dict | list[str], source: str) -> Any:
    try:
        config = OmegaConf.create(without_retired(update, source) if isinstance(update, dict) else {})
    except OmegaConfBaseException as e:  # a malformed interpolation (`${}`, `${model.d_ff`): OmegaConf parses it here
        raise _not_taken(e, source, _written(update, source, e.full_key)) from None
    for item in update if isinstance(update, list) else ():  # each value read as a file's are (not by OmegaConf's reader)
        if "=" not in item:
            raise ConfigError(f"{source}: override '{item}' must look like key=value (e.g. model.heads=4)")
        key, _, value = item.partition("=")
        if not all(part.strip() for part in key.split(".")):  # OmegaConf names no key ('?') or takes the dots apart
            raise ConfigError(f"{source}: override '{item}' has an empty key or key part: write key=value (e.g. model.heads=4)")
        try:
            OmegaConf.update(config, key, parse_yaml(value, f"{source}: override '{item}'", lines=False), merge=True)
        except OmegaConfBaseException as e:
            raise _not_taken(e, source, value.strip()) from None
    _list_in_list(OmegaConf.to_container(config), source)
    return config


def _not_taken(err: OmegaConfBaseException, source: str, written: Any) -> ConfigError:
    """OmegaConf's error for a value it cannot hold or resolve, naming the key (its line, in a file) and the value as
    written; a `${...}` it cannot parse, or resolve (a key not there, a loop, an environment variable not set), says so."""
    key = err.full_key or "?"
    said = str(err).splitlines()[0]
    if isinstance(err, GrammarParseError):
        return ConfigError(
            f"{source}: bad value for '{key}'{_at_line(source, key)}: {written!r} is a malformed ${{...}} interpolation "
            f"({said}); write ${{section.key}} or ${{oc.env:NAME}}, or \\${{ for the text itself"
        )
    if isinstance(err, InterpolationResolutionError):
        return ConfigError(f"{source}: bad value for '{key}'{_at_line(source, key)}: {written!r} cannot be resolved ({said})")
    return _friendly(err, source, None if written is None else str(written))


def _written(update: dict | list[str], source: str, key: str | None) -> Any:
    """The value `update` gives `key` (dotted), as written in the file `source` names where it is one; None if none."""
    if not key or (typed := _typed(update, source, key)) is not None:
        return typed
    node: Any = update
    for part in _INDEX.sub("", key).split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


@contextlib.contextmanager
def resolving(updates: list[tuple[dict | list[str], str]]) -> Iterator[None]:
    """Reading a merged config (its interpolations resolved as it is read): OmegaConf's error becomes a ConfigError
    naming the key and the last of `updates` that set it (a file and its line, the command line, a sweep's row)."""
    try:
        yield
    except OmegaConfBaseException as e:
        key = _INDEX.sub("", e.full_key or "")
        setters = [(update, source) for update, source in updates if _sets(update, key)]
        update, source = setters[-1] if setters else ([], "config")
        raise _not_taken(e, source, _written(update, source, key)) from None


def _sets(update: dict | list[str], key: str) -> bool:
    if isinstance(update, list):
        return any(item.partition("=")[0].strip() == key for item in update)
    node: Any = update
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return key in update if isinstance(update, dict) else False  # a dotted key written whole
        node = node[part]
    return True


def merged(base: Any, updates: list[tuple[dict | list[str], str]]) -> Any:
    """`updates` (each with its source) merged onto `base` in one pass: OmegaConf copies the base once per merge, and
    a sweep composes a config per row. Where that fails, one at a time, so the error names the source at fault."""
    configs = [(_as_config(update, source), source) for update, source in updates]
    try:
        return OmegaConf.merge(base, *(config for config, _ in configs))
    except (OmegaConfBaseException, TypeError):  # TypeError: see merge
        # Every unknown key of every source at once (a typo fixed should not reveal the next one); then the first error.
        unknown = [
            _unknown_key(key, source)
            for config, source in configs
            for key in _unknown_keys(OmegaConf.to_container(config), ExperimentConfig())
        ]
        if len(unknown) > 1:
            raise ConfigError(
                "unknown config keys:\n" + "\n".join(f"  - {u.replace(': unknown config key ', ': ', 1)}" for u in unknown)
            ) from None
        for update, source in updates:
            base = merge(base, update, source)
        return base


@functools.cache
def _schema_once() -> Any:
    return OmegaConf.structured(ExperimentConfig)


def schema() -> Any:
    """A fresh structured config of the schema's defaults: a copy of one built once (building one reads every field
    of every dataclass, several times slower than the copy, and a sweep composes one per row)."""
    return copy.deepcopy(_schema_once())
