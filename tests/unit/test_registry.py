"""Registries: names map to classes; a taken name and an unknown name are errors that say which and what instead."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ablate.model import ATTENTION, POSITIONAL, SCALING
from ablate.registry import Registry, lookup, register


class First:
    pass


class Second:
    pass


def test_register_adds_the_class_and_returns_it():
    table: dict[str, type] = {}
    assert register(table, "first")(First) is First
    assert table == {"first": First}


def test_a_taken_name_is_refused_naming_both_classes():
    table = {"first": First}
    with pytest.raises(ValueError) as err:
        register(table, "first")(Second)
    assert "'first'" in str(err.value)
    assert f"{__name__}.Second" in str(err.value) and f"{__name__}.First" in str(err.value)
    assert table == {"first": First}


def test_a_registry_takes_only_subclasses_of_its_base():
    table = Registry(First)
    child = type("Child", (First,), {})
    register(table, "child")(child)
    with pytest.raises(TypeError, match=rf"cannot register {__name__}.Second as 'second': it must subclass {__name__}.First"):
        register(table, "second")(Second)
    assert dict(table) == {"child": child}


@pytest.mark.parametrize("registry", [ATTENTION, POSITIONAL, SCALING], ids=["attention", "positional", "scaling"])
def test_every_model_registry_declares_a_base_its_entries_share(registry):
    assert isinstance(registry, Registry) and all(issubclass(cls, registry.base) for cls in registry.values())


def test_lookup_names_the_key_the_choices_and_the_closest():
    table = {"additive": First, "local": Second}
    assert lookup(table, "local", "model.attention") is Second
    message = r"^model.attention='addtive' is not one of \['additive', 'local'\] \(did you mean 'additive'\?\)$"
    with pytest.raises(ValueError, match=message):
        lookup(table, "addtive", "model.attention")
    with pytest.raises(ValueError, match=r"is not one of \['additive', 'local'\]$"):
        lookup(table, "zzz", "model.attention")


@pytest.mark.parametrize("registry", [ATTENTION, POSITIONAL, SCALING], ids=["attention", "positional", "scaling"])
def test_registry_keys_are_lowercase_snake(registry):
    assert registry and all(name.isidentifier() and name == name.lower() for name in registry)


class Kernel:
    pass


class BuiltIn(Kernel):
    pass


class Other(Kernel):
    pass


WRITES = {
    "assignment": lambda t: t.__setitem__("built_in", Other),
    "new key": lambda t: t.__setitem__("other", Other),
    "del": lambda t: t.__delitem__("built_in"),
    "update": lambda t: t.update(built_in=Other),
    "pop": lambda t: t.pop("built_in"),
    "popitem": lambda t: t.popitem(),
    "setdefault": lambda t: t.setdefault("other", Other),
    "clear": lambda t: t.clear(),
    "|=": lambda t: t.__ior__({"built_in": Other}),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_registry_refuses_every_write_but_register(write):
    table = Registry(Kernel)
    register(table, "built_in")(BuiltIn)
    with pytest.raises(TypeError, match=r"^registry of .*Kernel is read-only: add a class with @register\(table, name\)"):
        write(table)
    assert dict(table) == {"built_in": BuiltIn}


@pytest.mark.slow  # a subprocess importing ablate: seconds; the default set stays under a minute
def test_a_plugin_cannot_replace_a_built_in_kernel_by_assignment():
    # In a fresh process: before the fix the assignment succeeds, and would swap the kernel under every later test.
    plugin = "from ablate.model import ATTENTION\nATTENTION['scaled_dot_product'] = object\n"
    proc = subprocess.run([sys.executable, "-c", plugin], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith("TypeError: registry of ablate.model.attention.AttentionKernel is read-only")


def test_restoring_takes_back_what_the_block_registered_and_nothing_else():
    from ablate.registry import restoring

    table = Registry(Kernel)
    register(table, "built_in")(BuiltIn)
    with restoring(table):
        register(table, "other")(Other)
        assert dict(table) == {"built_in": BuiltIn, "other": Other}
    assert dict(table) == {"built_in": BuiltIn}
    with pytest.raises(RuntimeError), restoring(table):
        register(table, "other")(Other)
        raise RuntimeError("a plugin failing halfway")
    assert dict(table) == {"built_in": BuiltIn}
    with restoring(table, on_error_only=True):
        register(table, "other")(Other)
    assert dict(table) == {"built_in": BuiltIn, "other": Other}  # kept: the block succeeded
