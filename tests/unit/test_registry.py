"""Registries: names map to classes; a taken name and an unknown name are errors that say which and what instead."""

from __future__ import annotations

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
