"""The one JSON reader for what runs write (summaries, evaluation records): every problem an error naming the file,
and a key given twice refused, where plain `json` keeps the last one silently and a hand-edited record would
carry whichever number came second."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_json(path: str | os.PathLike, what: str, error: type[Exception] = ValueError) -> Any:
    """The parsed contents of the JSON file at `path`; `error` (naming the file and `what` it should be) for an
    unreadable file, invalid JSON (line and column) or a duplicate key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: not a readable {what} ({type(e).__name__}: {e})") from None
    try:
        return json.loads(text, object_pairs_hook=_unique(path, what, error))
    except json.JSONDecodeError as e:
        raise error(f"{path}: not a readable {what} (invalid JSON: {e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:  # json recurses once per nesting level
        raise error(f"{path}: not a readable {what} (nested too deeply)") from None


def object_or_empty(path: str | os.PathLike) -> dict:
    """The JSON object at `path` (a run's summary.json, an evaluation record), {} where it is missing, unreadable or
    not an object: for readers that go on without it (a table's cells, a trial's attributes), never a crash."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _unique(path: Path, what: str, error: type[Exception]):
    def pairs(items: list[tuple[str, Any]]) -> dict:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                raise error(f"{path}: not a valid {what}: duplicate key '{key}'")
            seen.add(key)
        return dict(items)

    return pairs
