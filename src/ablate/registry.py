"""Name -> class registries for model variants; the one place an unknown name becomes an error."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

from ablate.messages.hints import did_you_mean

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


class Registry(Mapping):
    """A name -> class table whose entries subclass `base`, the class that declares the facts every entry has
    (e.g. `AttentionKernel.takes_bias`), so code reads those facts as plain attributes of any entry.

    Read-only: `register()` is the only way in, so a plugin cannot replace a built-in silently (`ATTENTION[name] =
    cls`, `del`, `update`, `pop`, ... raise a TypeError), and `restoring()` the only way a name leaves."""

    def __init__(self, base: type):
        self.base = base
        self._entries: dict[str, type] = {}

    def __getitem__(self, name: str) -> type:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({_qualname(self.base)}, {self._entries!r})"

    def _refuse(self, *args, **kwargs):
        raise TypeError(f"registry of {_qualname(self.base)} is read-only: add a class with @register(table, name) (ablate.registry)")

    __setitem__ = __delitem__ = __ior__ = update = pop = popitem = setdefault = clear = _refuse


def register(table: dict[str, T], name: str) -> Callable[[T], T]:
    """Class decorator: `@register(ATTENTION, "additive")` adds the class to the table under `name`."""

    def add(cls: T) -> T:
        if isinstance(table, Registry) and not (isinstance(cls, type) and issubclass(cls, table.base)):
            raise TypeError(f"cannot register {_qualname(cls)} as '{name}': it must subclass {_qualname(table.base)}")
        if name in table:
            raise NameTaken(f"cannot register {_origin(cls)} as '{name}': the name is taken by {_origin(table[name])}")
        if isinstance(table, Registry):
            table._entries[name] = cls
        else:
            table[name] = cls
        return cls

    return add


def lookup(table: dict[str, T], name: str, key: str) -> T:
    """Return table[name]; an unknown name raises a ValueError naming the config key and the choices."""
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"{key}='{name}' is not one of {sorted(table)}{did_you_mean(name, table)}") from None


@contextmanager
def restoring(*tables: Registry, on_error_only: bool = False) -> Iterator[None]:
    """Take back, when the block ends, every name registered in `tables` inside it (with `on_error_only`, only if
    the block raises): a plugin that fails halfway leaves nothing registered, a test leaves the tables as it found them."""
    before = [set(table) for table in tables]
    try:
        yield
    except BaseException:
        _take_back(tables, before)
        raise
    if not on_error_only:
        _take_back(tables, before)


def _take_back(tables: tuple[Registry, ...], before: list[set[str]]) -> None:
    for table, names in zip(tables, before):
        for name in set(table) - names:
            del table._entries[name]
