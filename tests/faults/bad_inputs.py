"""Bad inputs for tests/faults/test_bad_inputs.py, generated with a fixed seed: the ways a file ablate reads can be
damaged (truncated, garbled, invalid UTF-8), hostile YAML and JSON (unsafe tags, an alias bomb, deep nesting, wrong
types at each level, duplicate keys), and out-of-range values for numeric config keys and flags.

A damage is a plain tuple, so it can name a pytest case; `damage(path, spec, workspace)` applies it to the file at
`path`. Offsets are fractions of the file's length, so one spec fits whatever bytes the valid artefact has.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import yaml

SEED = 0
INVALID_UTF8 = b"\xff\xfe\xc3\x28"  # a BOM-like pair and an overlong lead byte: no UTF-8 decoder accepts them
BOMB_LEVELS = 7  # 9**7 = 4.8 million leaves once expanded: over any limit here, a few hundred bytes on disk
DEEP = 20_000  # nesting levels; Python's default recursion limit is 1,000


def file_damages(rng: random.Random) -> list[tuple[str, tuple]]:
    """(id, spec) of the damages any file can suffer: cut at 0 bytes, a third, two thirds and one byte short;
    three random bytes flipped in its middle half; invalid UTF-8 inserted in its middle."""
    flips = tuple((round(rng.uniform(0.25, 0.75), 4), rng.randrange(1, 256)) for _ in range(3))
    return [
        ("empty", ("truncate", 0.0)),
        ("cut-third", ("truncate", 1 / 3)),
        ("cut-two-thirds", ("truncate", 2 / 3)),
        ("cut-last-byte", ("truncate", -1)),
        ("flip-3-bytes", ("flip", flips)),
        ("invalid-utf8", ("insert", round(rng.uniform(0.3, 0.7), 4), INVALID_UTF8)),
    ]


def yaml_damages(rng: random.Random, doc: dict) -> list[tuple[str, tuple]]:
    """Hostile YAML for a file whose valid content is the mapping `doc`: unsafe tags, an alias bomb, deep nesting,
    a duplicate key, and wrong types at the root, at each top-level key and at a sample of nested keys."""
    cases = [
        ("python-object-tag", ("prepend", "evil: !!python/object/apply:os.system ['touch {w}/PWNED']\n")),
        ("python-name-tag", ("prepend", "evil: !!python/name:os.system\n")),
        ("alias-bomb", ("prepend", alias_bomb())),
        ("deep-nesting", ("append", "deep: " + "[" * DEEP + "]" * DEEP + "\n")),
        ("deep-mapping", ("append", "deep: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n")),
        ("duplicate-key", ("append", f"{next(iter(doc))}: 1\n")),
        ("root-list", ("replace", "- 1\n- 2\n")),
        ("root-scalar", ("replace", "just some text\n")),
    ]
    for key, value in doc.items():
        cases.append((f"wrong-type-{key}", ("set", [key], wrong_type(rng, value))))
    nested = [(k, sub) for k, v in doc.items() if isinstance(v, dict) for sub in v]
    for k, sub in rng.sample(nested, min(4, len(nested))):
        cases.append((f"wrong-type-{k}.{sub}", ("set", [k, sub], wrong_type(rng, doc[k][sub]))))
    return cases


def json_damages(rng: random.Random) -> list[tuple[str, tuple]]:
    """Hostile JSON: deep nesting, a duplicate key, NaN and 1e999 where numbers are, wrong types at the root and at
    a few keys picked when the file's content is known (fractions of its key list)."""
    cases = [
        ("deep-nesting", ("replace", "[" * DEEP + "]" * DEEP)),
        ("duplicate-key", ("json-duplicate",)),
        ("nan-number", ("json-numbers", "NaN")),
        ("overflowing-number", ("json-numbers", "1e999")),
        ("negative-number", ("json-numbers", "-1")),
        ("root-list", ("replace", "[1, 2]")),
        ("root-null", ("replace", "null")),
    ]
    for _ in range(3):
        frac, kind = round(rng.random(), 4), rng.choice(["list", "object", "string", "bool"])
        cases.append((f"wrong-type-key@{frac}-{kind}", ("json-set", frac, kind)))
    return cases


def csv_damages(rng: random.Random) -> list[tuple[str, tuple]]:
    """A metrics.csv with a cell that is not a number, a ragged row, no header."""
    return [
        ("cell-not-a-number", ("csv-cell", round(rng.random(), 4), "abc")),
        ("cell-nan", ("csv-cell", round(rng.random(), 4), "nan")),
        ("cell-overflow", ("csv-cell", round(rng.random(), 4), "1e999")),
        ("ragged-row", ("append", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n")),
        ("no-header", ("drop-first-line",)),
    ]


def alias_bomb(levels: int = BOMB_LEVELS) -> str:
    """'Billion laughs': each anchor a list of nine aliases of the one before, under unknown keys at the top."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def wrong_type(rng: random.Random, value: Any) -> Any:
    """A value of another kind than `value`: a mapping or list where a scalar is, a scalar where a mapping is."""
    if isinstance(value, dict):
        return rng.choice([[1, 2], 5, "text"])
    if isinstance(value, list):
        return rng.choice([{"x": 1}, 5])
    return rng.choice([{"x": [1]}, [value, value]])


# -- applying a damage -------------------------------------------------------------------------------------------


def damage(path: Path, spec: tuple, workspace: Path) -> None:
    """Apply the damage `spec` to the file at `path`; `{w}` in inserted text is the workspace's path."""
    kind, *args = spec
    data = path.read_bytes()
    text = lambda s: s.replace("{w}", str(workspace)).encode()  # noqa: E731
    if kind == "truncate":
        data = data[: len(data) - 1 if args[0] == -1 else int(len(data) * args[0])]
    elif kind == "flip":
        buf = bytearray(data)
        for frac, xor in args[0]:
            buf[int(len(buf) * frac)] ^= xor
        data = bytes(buf)
    elif kind == "insert":
        at = int(len(data) * args[0])
        data = data[:at] + args[1] + data[at:]
    elif kind == "prepend":
        data = text(args[0]) + data
    elif kind == "append":
        data = data + (b"" if data.endswith(b"\n") else b"\n") + text(args[0])
    elif kind == "replace":
        data = text(args[0])
    elif kind == "set":
        doc = yaml.safe_load(data)
        set_key(doc, args[0], args[1])
        data = yaml.safe_dump(doc, sort_keys=False).encode()
    elif kind == "drop-first-line":
        data = data.split(b"\n", 1)[1]
    elif kind == "csv-cell":
        data = _csv_cell(data, args[0], args[1])
    else:
        data = _json_damage(data, kind, args)
    path.write_bytes(data)


def set_key(doc: dict, keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        doc = doc.setdefault(key, {})
    doc[keys[-1]] = value


def _json_damage(data: bytes, kind: str, args: list) -> bytes:
    doc = json.loads(data)
    if kind == "json-duplicate":  # the first key of the top mapping given twice, with another value first
        key = next(iter(doc))
        return data.replace(b"{", b"{" + json.dumps(key).encode() + b": 0, ", 1)
    if kind == "json-numbers":  # every number of the file written as args[0] (NaN, 1e999: Python's json reads both)
        return json.dumps(_numbers(doc, "@NUMBER@")).replace('"@NUMBER@"', args[0]).encode()
    if kind == "json-set":  # the key at a fraction of the list of every key path, given a value of another kind
        paths = _key_paths(doc)
        keys = paths[int(args[0] * len(paths)) % len(paths)]
        set_key(doc, keys, {"list": [1, 2], "object": {"x": 1}, "string": "text", "bool": True}[args[1]])
        return json.dumps(doc).encode()
    raise ValueError(f"unknown damage {kind}")


def _numbers(doc: Any, marker: str) -> Any:
    if isinstance(doc, dict):
        return {k: _numbers(v, marker) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_numbers(v, marker) for v in doc]
    return marker if isinstance(doc, (int, float)) and not isinstance(doc, bool) else doc


def _key_paths(doc: Any, prefix: tuple = ()) -> list[list[str]]:
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append([*prefix, k])
            out += _key_paths(v, (*prefix, k))
    return out


def _csv_cell(data: bytes, frac: float, value: str) -> bytes:
    """A numeric cell of a data row (picked by `frac` among the non-empty ones) replaced by `value`."""
    lines = data.decode().splitlines(keepends=True)
    cells = [(i, j) for i, line in enumerate(lines[1:], 1) for j, c in enumerate(line.rstrip("\n").split(",")) if c]
    i, j = cells[int(frac * len(cells)) % len(cells)]
    row = lines[i].rstrip("\n").split(",")
    row[j] = value
    lines[i] = ",".join(row) + "\n"
    return "".join(lines).encode()


# -- out-of-range values ----------------------------------------------------------------------------------------

HUGE_INT = 10**12  # a legal int to OmegaConf, far past any size this machine can hold
INT_VALUES = {"neg": -1, "zero": 0, "huge-int": HUGE_INT, "1e308": 1e308, "nan": math.nan, "inf": math.inf, "bool": True, "str": "abc"}
FLOAT_VALUES = {k: v for k, v in INT_VALUES.items() if k != "huge-int"}
FLAG_VALUES = ["-1", "0", str(HUGE_INT), "1e308", "nan", "abc"]
