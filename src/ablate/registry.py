"""Name -> class registries for model variants; the one place an unknown name becomes an error."""

from __future__ import annotations

import difflib
from typing import Callable, TypeVar

T = TypeVar("T")


def register(table: dict[str, T], name: str) -> Callable[[T], T]:
    """Class decorator: `@register(ATTENTION, "additive")` adds the class to the table under `name`."""

    def add(cls: T) -> T:
        if name in table:
            raise ValueError(f"'{name}' is already registered as {table[name]}")
        table[name] = cls
        return cls

    return add


def lookup(table: dict[str, T], name: str, key: str) -> T:
    """Return table[name]; an unknown name raises a ValueError naming the config key and the choices."""
    try:
        return table[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(table), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"{key}='{name}' is not one of {sorted(table)}{hint}") from None
