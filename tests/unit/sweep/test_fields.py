"""The type and range checks of a sweep file's values (`ablate.sweep.fields`): each error names the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.config import ConfigError
from ablate.sweep import fields

SWEEP = Path("sweeps/x.yaml")


def test_a_key_that_is_absent_or_empty_takes_its_default():
    assert fields.given({"workers": None}, "workers", 1) == 1 and fields.given({}, "workers", 1) == 1
    assert fields.given({"workers": 0}, "workers", 1) == 0  # present, even when falsy
    assert fields.mapping(SWEEP, {"pruner": None}, "pruner", "{name: median}") == {}


@pytest.mark.parametrize("check, message", [
    (lambda: fields.count(SWEEP, "workers", 0), "sweeps/x.yaml: workers=0 must be an integer >= 1"),
    (lambda: fields.count(SWEEP, "workers", True), "sweeps/x.yaml: workers=True must be an integer >= 1"),
    (lambda: fields.count(SWEEP, "workers", 65, most=64), "sweeps/x.yaml: workers=65 must be at most 64"),
    (lambda: fields.seconds(SWEEP, "timeout", float("nan")), "sweeps/x.yaml: timeout=nan must be a number of seconds > 0"),
    (lambda: fields.text(SWEEP, "name", 3), "sweeps/x.yaml: name must be a string, got 3"),
    (
        lambda: fields.text(SWEEP, "storage", {"url": "postgresql://alice:Sup3rSecretPw@db/x"}, secret=True),
        "sweeps/x.yaml: storage must be a string, got a dict (not shown: it may hold a password)",
    ),
    (lambda: fields.seeds(SWEEP, "seeds", []), "sweeps/x.yaml: seeds: [] lists no seed"),
    (lambda: fields.seeds(SWEEP, "seeds", [1, 1]), "sweeps/x.yaml: seeds lists a seed twice: [1, 1]"),
    (lambda: fields.seeds(SWEEP, "seeds", [1, -2]), "sweeps/x.yaml: seeds lists -2: a seed must be from 0 to"),
    (lambda: fields.seeds(SWEEP, "seeds", "1"), "sweeps/x.yaml: seeds must be a list of integers, got '1'"),
    (lambda: fields.mapping(SWEEP, {"pruner": "median"}, "pruner", "{name: median}"), "pruner must be a mapping, e.g. {name: median}"),
    (lambda: fields.check_keys(SWEEP, "objective", {"metrc": 1}, {"metric", "direction"}), "unknown key 'metrc' in objective (did you mean 'metric'?)"),
    # a config key at the sweep file's top: every trial's, so in overrides (a newcomer's plugins went there)
    (lambda: fields.check_keys(SWEEP, "the sweep file", {"plugins": ["a.py"]}, {"name", "overrides"}),
     "unknown key 'plugins' in the sweep file (a config key for every trial goes in overrides: {plugins: ...})"),
])  # fmt: skip
def test_a_bad_value_names_the_file_and_the_key(check, message):
    with pytest.raises(ConfigError) as e:
        check()
    assert message in str(e.value)


def test_good_values_come_back_as_given():
    assert fields.count(SWEEP, "workers", 4, most=64) == 4 and fields.count(SWEEP, "n_trials", None) is None
    assert fields.seconds(SWEEP, "timeout", 2.5) == 2.5 and fields.seeds(SWEEP, "seeds", None) == []
    assert fields.seeds(SWEEP, "seeds", [3, 1]) == [3, 1] and fields.text(SWEEP, "name", "q") == "q"


def test_every_unknown_key_is_named_at_once_with_its_line(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nobjectve: val/bleu\nobjective:\n  metrc: val/bleu\nworker: 2\n")
    with pytest.raises(ConfigError) as e:
        fields.check_keys(
            path, "the sweep file", {"name": 1, "objectve": 1, "objective": 1, "worker": 1}, {"name", "objective", "workers"}, at=""
        )
    assert (
        f"{path}: unknown key 'objectve' in the sweep file (did you mean 'objective'?) at line 2; "
        "unknown key 'worker' in the sweep file (did you mean 'workers'?) at line 5; allowed: ['name', 'objective', 'workers']"
    ) == str(e.value)
    with pytest.raises(ConfigError, match="unknown key 'metrc' in objective \\(did you mean 'metric'\\?\\) at line 4;"):
        fields.check_keys(path, "objective", {"metrc": 1}, {"metric"}, at="objective")


def test_a_seed_override_is_refused_only_where_seeds_replace_it():
    assert fields.seed_overridden("variant 'a'", {"seed": 3}, []) is None and fields.seed_overridden("overrides", {}, [1]) is None
    said = fields.seed_overridden("variant 'a'", {"seed": 3}, [1, 2], "a")
    assert said.startswith("variant 'a': seed 3 would be replaced") and said.endswith("row_seeds: {a: [3]}")
