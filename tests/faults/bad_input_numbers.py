"""The numeric cases of tests/faults/test_bad_inputs.py: every int or float key of the config schema, a sweep file's
numeric keys and every numeric flag of every verb, at out-of-range values (bad_inputs.INT_VALUES, FLAG_VALUES)."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from bad_input_cases import CONFIG, Case, argv_of, rng
from bad_inputs import FLAG_VALUES, FLOAT_VALUES, INT_VALUES

# -- numeric config keys ------------------------------------------------------------------------------------------

NUMERIC = {int: INT_VALUES, float: FLOAT_VALUES, int | None: INT_VALUES, float | None: FLOAT_VALUES, list[float]: FLOAT_VALUES}


def numeric_keys() -> list[tuple[str, dict]]:
    """(dotted key, values to try) for every int or float field of the config schema (and the list of floats
    train.betas, one element at a time), plus train.max_time, a string that holds seconds."""
    from ablate.config import schema

    sections = {"model": schema.ModelConfig, "data": schema.DataConfig, "train": schema.TrainConfig, "sweep": schema.SweepConfig}
    keys = []
    for prefix, cls in [*sections.items(), ("", schema.ExperimentConfig)]:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if hints[f.name] in NUMERIC:
                keys.append((f"{prefix}.{f.name}".lstrip("."), NUMERIC[hints[f.name]]))
    return keys + [("train.max_time", {k: v for k, v in FLOAT_VALUES.items() if k != "bool"})]


def key_value(key: str, value: Any) -> Any:
    """The value as the config file holds it (train.betas: as its first element; max_time: as a string)."""
    if key == "train.betas":
        return [value, 0.98]
    return str(value) if key == "train.max_time" and not isinstance(value, str) else value


def always_bad(label: str) -> bool:
    """Negative numbers, NaN, infinity, booleans and text are never a numeric setting ablate accepts."""
    return label in ("neg", "nan", "inf", "bool", "str")


FAST = ("train.max_time=8", "train.max_steps=2", "train.val_max_sentences=8")  # a legal run ends in seconds


def key_cases(accepts, baseline: dict[str, Any]) -> list[Case]:
    """Each numeric key at out-of-range values. Values the validator refuses (`accepts(key, value)` false, or
    `always_bad`): one per key, sampled, through `params` or `train` (both load a config the same way). Values it
    accepts run `train` (which builds the model), in seconds (FAST, save the key under test), and must then finish
    or fail naming the key; not where the value is the valid run's own (`baseline`)."""
    cases = []
    for key, values in numeric_keys():
        refused = [label for label, v in values.items() if always_bad(label) or not accepts(key, key_value(key, v))]
        pick = rng(key)
        sampled = pick.choice(refused) if refused else None
        for label, value in values.items():
            if label in refused and label != sampled:
                continue
            if label not in refused and baseline.get(key) == key_value(key, value):
                continue
            verb = pick.choice(["params", "train"]) if label in refused else "train"
            spec = ("set", key.split("."), key_value(key, value))
            names = (key, key.rsplit(".", 1)[-1] + ":") if "." in key else (key,)
            fast = tuple(o for o in FAST if o.split("=")[0] != key) if verb == "train" else ()
            policy = "illegal" if label in refused else "legal"
            cases.append(Case(f"{verb}:{key}={label}", argv_of(verb, fast), CONFIG, spec, names, policy))
    return cases


SWEEP_KEYS = {
    "n_trials": [-1, 0, 1e308, math.nan, True, "abc"],
    "timeout": [-1, 0, math.nan, math.inf, "abc"],
    "workers": [-1, 0, 10**12, 2.5],
    "gpus_per_trial": [-1, 0, math.inf],
    "trials_per_gpu": [-1, 0, math.nan, "abc"],
    "seeds": [[-1], [2**40], [math.nan], ["abc"], [True]],
    "sampler": [{"name": "tpe", "seed": -1}, {"name": "tpe", "seed": math.nan}, {"name": "tpe", "seed": 1e308}],
    "pruner": [{"name": "median", "n_startup_trials": -1}, {"name": "median", "n_warmup_steps": math.inf}],
}


def sweep_key_cases() -> list[Case]:
    """The sweep file's numeric keys out of range, through `ablate sweep --dry-run`; each is an error naming the key."""
    cases = []
    for key, values in SWEEP_KEYS.items():
        for value in values:
            spec = ("set", [key], value)
            cases.append(Case(f"sweep-dry-run:sweep.yaml:{key}={value!r}", argv_of("sweep-dry-run"), "sweep.yaml", spec, (key,), "illegal"))
    return cases


# -- numeric flags ------------------------------------------------------------------------------------------------

# What each numeric flag's help text allows (a value outside is an error naming the flag); finite values only.
FLAG_RULES = {
    "--workers": lambda v: 1 <= v <= 1024,  # ablate.config.validation.MAX_PARALLEL: each worker is a process
    "--n-trials": lambda v: v >= 1,
    "--trials-per-gpu": lambda v: v >= 1,
    "--seeds": lambda v: 0 <= v < 2**32,
    "--boot": lambda v: 10 <= v <= 1_000_000,  # ablate.table.commands.MIN_BOOT, ablate.cli.MAX_BOOT
    "--seed": lambda v: 0 <= v < 2**32,
    "--target-mde": lambda v: v >= 0,  # "0: off"
    "--at-update": lambda v: v >= 1,
    "--beam": lambda v: 1 <= v <= VOCAB,  # "1 = greedy"; a beam holds distinct hypotheses of the vocabulary
    "--alpha": lambda v: v >= 0,  # train.length_penalty's rule
    "--batch-tokens": lambda v: v >= 1,
    "--longer-than": lambda v: v >= 0,  # train.eval_longer_than's rule
    "--last": lambda v: v >= 1,
    "--members": lambda v: 1 <= v <= 1024,  # ablate.config.validation.MAX_MEMBERS (train and sweep)
}
VOCAB = 64  # the tiny run's vocabulary (tests/faults/test_bad_inputs.py)
FLAG_VERBS = {"train": "train", "sweep": "sweep", "table": "table", "translate": "translate", "evaluate": "evaluate", "average": "average"}
# "N or auto": typed by hand, so introspection cannot see them
EXTRA_NUMERIC = {("sweep", "--trials-per-gpu"): int, ("sweep", "--members"): int}


def numeric_flags() -> list[tuple[str, str, type]]:
    """(verb, flag, type) of every option of every verb parsed as an int or a float, read off ablate's parser."""
    import argparse

    from ablate.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = [
        (verb, next(f for f in action.option_strings if f.startswith("--")), _numeric(action.type))
        for verb, parser in sub.choices.items()
        for action in parser._actions
        if _numeric(action.type) and action.option_strings
    ]
    return flags + [(verb, flag, kind) for (verb, flag), kind in EXTRA_NUMERIC.items()]


def _numeric(kind) -> type | None:
    """int or float, also as the kind of a bounded type (ablate.cli.Number carries it as `.kind`)."""
    kind = getattr(kind, "kind", kind)
    return kind if kind in (int, float) else None


def flag_cases() -> list[Case]:
    cases = []
    for verb, flag, kind in numeric_flags():
        for raw in FLAG_VALUES:
            try:
                value = kind(raw) if kind is float else int(raw)
            except ValueError:
                value = None  # argparse refuses it: "invalid int value"
            legal = value is not None and math.isfinite(value) and FLAG_RULES[flag](value)
            cases.append(
                Case(f"{verb}:{flag}={raw}", argv_of(FLAG_VERBS[verb], (flag, raw)), names=(flag,), policy="legal" if legal else "illegal")
            )
    return cases
