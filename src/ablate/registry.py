"""Name -> class registries for model variants; the one place an unknown name becomes an error."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from ablate.hints import did_you_mean

T = TypeVar("T")


def _qualname(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def _origin(obj: object) -> str:
    """The class's qualified name, and for a class from outside ablate (a plugin) the file defining it."""
    module = getattr(obj, "__module__", "") or ""
    file = getattr(sys.modules.get(module), "__file__", None)
    outside = module != "ablate" and not module.startswith("ablate.")
    return _qualname(obj) + (f" ({file})" if outside and file else "")


class NameTaken(ValueError):
    """A registration under a name another class holds; names both classes (and a plugin's file)."""


class Registry(dict):
    """A name -> class table whose entries subclass `base`, the class that declares the facts every entry has
    (e.g. `AttentionKernel.takes_bias`), so code reads those facts as plain attributes of any entry."""

    def __init__(self, base: type):
        super().__init__()
        self.base = base


def register(table: dict[str, T], name: str) -> Callable[[T], T]:
    """Class decorator: `@register(ATTENTION, "additive")` adds the class to the table under `name`."""

    def add(cls: T) -> T:
        if isinstance(table, Registry) and not (isinstance(cls, type) and issubclass(cls, table.base)):
            raise TypeError(f"cannot register {_qualname(cls)} as '{name}': it must subclass {_qualname(table.base)}")
        if name in table:
            raise NameTaken(f"cannot register {_origin(cls)} as '{name}': the name is taken by {_origin(table[name])}")
        table[name] = cls
        return cls

    return add


def lookup(table: dict[str, T], name: str, key: str) -> T:
    """Return table[name]; an unknown name raises a ValueError naming the config key and the choices."""
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"{key}='{name}' is not one of {sorted(table)}{did_you_mean(name, table)}") from None
