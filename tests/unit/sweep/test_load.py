"""Loading a sweep file (ablate.sweep.load): every row that cannot be run is named at once, before anything starts."""

from __future__ import annotations

import pytest
from sweep_files import write

from ablate.config import ConfigError
from ablate.sweep.load import SHOWN_ROWS, load_sweep


def test_every_bad_row_is_named_at_once(tmp_path):
    """A file with four bad rows took four runs of the command, one row named each time."""
    rows = "  base: {}\n  A: {model.haeds: 2}\n  B: {model.heads: 7}\n  C:\n  D: {model.dropout: 3}\n  E: {model.heads: 2}\n"
    path = write(tmp_path, "name: demo\nbase: base.yaml\nvariants:\n" + rows)
    with pytest.raises(ConfigError) as e:
        load_sweep(path)
    lines = str(e.value).splitlines()
    assert lines[0] == f"{path}: 4 variants cannot be run:"
    assert lines[1] == "  - variant 'A': overrides: unknown config key 'model.haeds' (did you mean 'model.heads'?)"
    assert lines[2] == "  - variant 'B': invalid config:" and "model.heads=7" in lines[3] and lines[3].startswith("      - ")
    assert lines[4] == "  - variant 'C' must map config keys to values, got None (a row that changes nothing is written {})"
    assert lines[5] == "  - variant 'D': invalid config:" and "model.dropout=3.0 must be in [0, 1)" in lines[6]
    assert len(lines) == 7  # E is fine


def test_one_bad_row_is_one_line_and_many_are_counted_past_the_first_ones(tmp_path):
    path = write(tmp_path, "name: demo\nbase: base.yaml\nvariants:\n  base: {}\n  A: {model.haeds: 2}\n")
    with pytest.raises(ConfigError, match=r"sweep.yaml: variant 'A': overrides: unknown config key 'model.haeds'"):
        load_sweep(path)
    many = "".join(f"  r{i}: {{model.dropout: 3}}\n" for i in range(SHOWN_ROWS + 5))
    path = write(tmp_path, "name: demo\nbase: base.yaml\nvariants:\n  base: {}\n" + many)
    with pytest.raises(ConfigError) as e:
        load_sweep(path)
    said = str(e.value)
    assert f"{SHOWN_ROWS + 5} variants cannot be run" in said and said.endswith("... and 5 more") and "variant 'r19'" in said
    assert "variant 'r20'" not in said


@pytest.mark.parametrize("extra, named", [
    ("member_data: bogus\n", "sweep.yaml: member_data='bogus' is not one of ['own', 'shared']"),
    ("overrides: {model.dropout: 3}\n", "base.yaml with the sweep's overrides: invalid config:"),
])  # fmt: skip
def test_a_sweep_wide_value_is_blamed_on_its_own_key_not_on_every_row_or_search_key(tmp_path, extra, named):
    for body in (
        "variants:\n  base: {}\n  A: {model.heads: 2}\n",
        "n_trials: 2\nsearch:\n  train.lr_scale: {type: float, low: 0.5, high: 2}\n",
    ):
        with pytest.raises(ConfigError) as e:
            load_sweep(write(tmp_path, "name: demo\nbase: base.yaml\n" + extra + body))
        assert named in str(e.value) and "variant" not in str(e.value) and "search." not in str(e.value)


@pytest.mark.parametrize("key", ["members.size", "out_dir", "logging.name", "sweep.row"])
def test_a_key_the_study_sets_for_each_trial_is_refused_in_a_search_or_a_row(tmp_path, key):
    """A search over members.size was recorded in the study and trained with size 1: nothing it drew changed a run."""
    search = f"n_trials: 2\nsearch:\n  {key}: {{type: categorical, choices: [2]}}\n"
    with pytest.raises(ConfigError, match=f"search.'{key}': each trial's {key} is the study's to set"):
        load_sweep(write(tmp_path, "name: demo\nbase: base.yaml\n" + search))
    if key != "members.size":  # a row's members.size is the size of its groups
        with pytest.raises(ConfigError, match=f"variant 'A': {key} is the study's to set for each trial"):
            load_sweep(write(tmp_path, f"name: demo\nbase: base.yaml\nvariants:\n  base: {{}}\n  A: {{{key}: x2}}\n"))


def test_a_row_seed_that_the_seeds_would_replace_is_refused_pointing_to_row_seeds(tmp_path):
    """`own: {seed: 5}` beside `seeds: [1, 2]` trained seeds 1 and 2, the row's 5 silently dropped."""
    head = "name: demo\nbase: base.yaml\n"
    for seeds in ("seeds: [1, 2]\n", "row_seeds: {own: [1, 2]}\n"):
        path = write(tmp_path, head + seeds + "variants:\n  base: {}\n  own: {seed: 5}\n")
        with pytest.raises(ConfigError) as e:
            load_sweep(path)
        assert str(e.value) == (
            f"{path}: variant 'own': seed 5 would be replaced by each of the seeds [1, 2], so it changes nothing; give the row "
            "seeds of its own with row_seeds: {own: [5]}"
        )
    path = write(tmp_path, head + "seeds: [1, 2]\noverrides: {seed: 5}\nvariants:\n  base: {}\n")
    with pytest.raises(ConfigError, match=r"overrides: seed 5 would be replaced by each of the seeds \[1, 2\]"):
        load_sweep(path)
    # No seeds apply: the row's own seed is the one it trains with, and the sweep-wide one a default for the rest.
    own = load_sweep(write(tmp_path, head + "row_seeds: {base: [1, 2]}\noverrides: {seed: 7}\nvariants:\n  base: {}\n  own: {seed: 5}\n"))
    assert own.rows() == [("base", 1), ("base", 2), ("own", None)] and own.row_config(own.variants["own"]).seed == 5


@pytest.mark.parametrize(
    "storage, kind", [("{url: 'postgresql://alice:Sup3rSecretPw@db/x'}", "dict"), ("[postgresql://alice, Sup3rSecretPw@db/x]", "list")]
)
def test_a_storage_that_is_no_string_is_refused_naming_its_type_never_its_value(tmp_path, storage, kind):
    """`storage: {url: ...}` was echoed whole, password and all: "storage must be a string, got {'url': ...}"."""
    path = write(tmp_path, f"name: demo\nbase: base.yaml\nstorage: {storage}\nvariants: {{base: {{}}}}\n")
    with pytest.raises(ConfigError) as e:
        load_sweep(path)
    assert str(e.value) == f"{path}: storage must be a string, got a {kind} (not shown: it may hold a password)"


def test_a_malformed_interpolation_in_a_row_or_a_search_choice_names_it_never_a_traceback(tmp_path):
    """OmegaConf's GrammarParseError escaped from the dry run, `ablate status` and `archive` as a traceback."""
    rows = "variants:\n  base: {}\n  A: {model.heads: '${model.d_ff'}\n  B: {model.heads: '${}'}\n"
    with pytest.raises(ConfigError) as e:
        load_sweep(write(tmp_path, "name: demo\nbase: base.yaml\n" + rows))
    lines = str(e.value).splitlines()
    assert lines[1].startswith(
        "  - variant 'A': overrides: bad value for 'model.heads': '${model.d_ff' is a malformed ${...} interpolation"
    )
    assert lines[2].startswith("  - variant 'B': overrides: bad value for 'model.heads': '${}' is a malformed")
    search = "n_trials: 2\nsearch:\n  model.heads: {type: categorical, choices: ['${model.d_ff']}\n"
    with pytest.raises(
        ConfigError, match=r"search.'model.heads'='\$\{model.d_ff': overrides: bad value for 'model.heads': '\$\{model.d_ff' is a malformed"
    ):
        load_sweep(write(tmp_path, "name: demo\nbase: base.yaml\n" + search))


def test_an_interpolation_a_row_cannot_resolve_is_named_with_the_row_among_every_bad_row(tmp_path):
    """It escaped _row_problem (ConfigError only) as OmegaConf's text, naming neither the file nor the row."""
    rows = "variants:\n  base: {}\n  A: {model.heads: '${model.nope}'}\n  B: {model.dropout: 3}\n"
    with pytest.raises(ConfigError) as e:
        load_sweep(write(tmp_path, "name: demo\nbase: base.yaml\n" + rows))
    lines = str(e.value).splitlines()
    assert lines[0].endswith("sweep.yaml: 2 variants cannot be run:")
    assert (
        lines[1]
        == "  - variant 'A': overrides: bad value for 'model.heads': '${model.nope}' cannot be resolved (Interpolation key 'model.nope' not found)"
    )
    assert lines[2] == "  - variant 'B': invalid config:"


@pytest.mark.parametrize("base", ["", "base: []\n", "base:\n"])
def test_a_sweep_without_a_base_is_refused_as_docs_say_it_is_required(tmp_path, base):
    """Front-door review: accepted, every trial would have trained the schema's defaults (48M parameters, 100,000 steps)."""
    path = write(tmp_path, f"name: demo\n{base}variants:\n  base: {{}}\n")
    with pytest.raises(ConfigError, match=r"sweep.yaml: base is missing: name the experiment file\(s\) every trial starts from"):
        load_sweep(path)
    assert load_sweep(path, to_run=False).name == "demo"  # status, table and archive still find a study run without one


def test_a_sweep_out_dir_under_home_is_there_not_in_a_folder_named_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = write(tmp_path, "name: demo\nbase: base.yaml\nout_dir: ~/sweeps/demo\nvariants:\n  base: {}\n")
    assert load_sweep(path).out_dir == tmp_path / "home" / "sweeps" / "demo"
