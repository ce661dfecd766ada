"""Loading: defaults, YAML files then overrides, unknown keys and bad YAML named; round trips; every shipped YAML loads."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ablate.config import ConfigError, ExperimentConfig, merge, retired, to_dict, to_yaml
from ablate.experiment import from_dict, load_config

ROOT = Path(__file__).resolve().parents[3]


def test_defaults_are_the_paper_base_model():
    cfg = load_config()
    m = cfg.model
    assert (m.enc_layers, m.dec_layers, m.d_model, m.d_ff, m.heads, m.dropout) == (6, 6, 512, 2048, 8, 0.1)
    assert (m.attention, m.attention_scaling, m.positional, m.norm) == ("scaled_dot_product", "inv_sqrt_dk", "sinusoidal", "post")
    assert cfg.train.label_smoothing == 0.1 and cfg.train.warmup == 4000 and list(cfg.train.betas) == [0.9, 0.98]


def test_yaml_then_overrides_compose(tmp_path):
    f = tmp_path / "exp.yaml"
    f.write_text("model:\n  heads: 4\n  positional: learned\ntrain:\n  max_steps: 10\n")
    cfg = load_config([f], ["model.heads=2", "train.lr_scale=2.0"])
    assert isinstance(cfg, ExperimentConfig)
    assert (cfg.model.heads, cfg.model.positional, cfg.train.max_steps, cfg.train.lr_scale) == (2, "learned", 10, 2.0)


def test_a_day_of_max_time_and_an_exponent_read_alike_from_a_file_and_the_command_line(tmp_path):
    """`1:00:00:00` is a day by either road (YAML 1.1's base-60 made it 216000 seconds, 2.5 days), `1:30` is
    refused as neither form, and `1e-1` in a member list is a number."""
    f = tmp_path / "exp.yaml"
    f.write_text("train:\n  max_time: 1:00:00:00\n")
    for cfg in (load_config([f]), load_config(overrides=["train.max_time=1:00:00:00"])):
        assert cfg.train.max_time == "1:00:00:00" and cfg.train.max_time_seconds == 86400.0
    with pytest.raises(ConfigError, match=r"train.max_time='1:30' must be seconds"):
        load_config(overrides=["train.max_time=1:30"])
    from ablate.run.commands import member_lists

    assert member_lists(["train.lr_scale=[1e-1, 2e-1]"])[0] == {"train.lr_scale": [0.1, 0.2]}


def test_unknown_key_names_closest_valid_keys():
    with pytest.raises(ConfigError, match=r"unknown config key 'model.head'.*model.heads"):
        load_config(overrides=["model.head=4"])


def test_unknown_key_in_yaml_names_the_file(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("train:\n  warmpu: 10\n")
    with pytest.raises(ConfigError, match=r"bad.yaml.*'train.warmpu'.*train.warmup"):
        load_config([f])


def test_every_unknown_key_of_every_source_is_named_at_once(tmp_path):
    """Two typos were two runs of the command: the first named, the second found only once it was fixed. A file's
    are named with their line."""
    f = tmp_path / "two.yaml"
    f.write_text("model:\n  haeds: 2\ntrain:\n  max_step: 3\n")
    with pytest.raises(ConfigError) as e:
        load_config([f], ["model.d_modle=64", "model.heads=2"])
    assert str(e.value).splitlines() == [
        "unknown config keys:",
        f"  - {f}: 'model.haeds' at line 2 (did you mean 'model.heads'?)",
        f"  - {f}: 'train.max_step' at line 4 (did you mean 'train.max_steps'?)",
        "  - command line: 'model.d_modle' (did you mean 'model.d_model'?)",
    ]


def test_a_dotted_key_in_a_file_says_how_a_file_nests_it(tmp_path):
    """`model.heads: 2` in a file (a sweep row's spelling) said "unknown config key 'model.heads' (did you mean
    'model.heads'?)"."""
    f = tmp_path / "dotted.yaml"
    f.write_text("model.heads: 2\n")
    with pytest.raises(
        ConfigError, match=r"dotted.yaml: unknown config key 'model.heads' at line 1: a file nests its keys \(model: \{heads: \.\.\.\}\)"
    ):
        load_config([f])


def test_wrong_type_names_key_and_value():
    with pytest.raises(ConfigError, match=r"model.heads.*'four'"):
        load_config(overrides=["model.heads=four"])


@pytest.mark.parametrize(
    "override, said",
    [
        ("model.heads=three", "bad value for 'model.heads': 'three' is not a whole number"),
        ("model.dropout=abc", "bad value for 'model.dropout': 'abc' is not a number"),
        ("train.val_bleu=maybe", "bad value for 'train.val_bleu': 'maybe' is not true or false"),
        ("model.d_ff=[64,128]", "bad value for 'model.d_ff': [64, 128] is a list, where one value goes (a whole number)"),
        ("logging.tags=foo", "bad value for 'logging.tags': 'foo' is not a list (write [foo])"),
        ("train.betas=0.9", "bad value for 'train.betas': '0.9' is not a list (write [0.9])"),
        ("out_dir=", "bad value for 'out_dir': an empty value, where a word or text goes (give one)"),
        ("logging.tags=", "bad value for 'logging.tags': an empty value, where a list goes (give one)"),
        ("model.attention={a: 1}", "bad value for 'model.attention': {'a': 1} is a section of keys, where one value goes (a word or text)"),
        ("logging.tags={a: 1}", "bad value for 'logging.tags': {'a': 1} is a section of keys, where a list goes"),  # was a TypeError
        ("train.max_steps=1e3", "bad value for 'train.max_steps': '1e3' is not a whole number"),  # as typed, not 1000.0
        ("train.betas=[0.9, null]", "bad value for 'train.betas[1]': an empty value, where a number goes (give one)"),
        ("logging.tags=[a, null]", "bad value for 'logging.tags[1]': an empty value, where a word or text goes (give one)"),
        # OmegaConf took these, and the run failed later on a bare TypeError
        ("train.betas=[[1, 2], 3]", "bad value for 'train.betas': [[1, 2], 3] has [1, 2] as an item, where each item is a number"),
        (
            "logging.tags=[a, {b: 1}]",
            "bad value for 'logging.tags': ['a', {'b': 1}] has {'b': 1} as an item, where each item is a word or text",
        ),
    ],
)
def test_a_wrong_type_is_said_in_words_not_omegaconfs(override, said):
    """OmegaConf's wording ("Value 'three' of type 'str' could not be converted to Integer") named its own types."""
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert str(e.value) == f"command line: {said}"


def test_a_bad_value_in_a_file_names_its_line_and_quotes_it_as_written(tmp_path):
    """Unknown keys in a file had their line and bad values did not; `1e3` was quoted as OmegaConf's 1000.0."""
    (tmp_path / "c.yaml").write_text("logging: {tags: quickstart}\n")
    with pytest.raises(
        ConfigError, match=r"c.yaml: bad value for 'logging.tags' at line 1: 'quickstart' is not a list \(write \[quickstart\]\)$"
    ):
        load_config([tmp_path / "c.yaml"])
    (tmp_path / "d.yaml").write_text("model:\n  heads: 2\ntrain:\n  max_steps: 1e3\n")
    with pytest.raises(ConfigError, match=r"d.yaml: bad value for 'train.max_steps' at line 4: '1e3' is not a whole number$"):
        load_config([tmp_path / "d.yaml"])


def test_a_section_given_a_value_names_the_section_and_its_keys(tmp_path):
    """`members: 3` (the sweep file's spelling) in a config said "bad value for '?'": no key named."""
    (tmp_path / "m.yaml").write_text("model:\n  heads: 4\nmembers: 3\n")
    with pytest.raises(ConfigError, match=r"m.yaml: 'members' is a section \(size, data, .*given the value 3.*members.size .*--members K"):
        load_config([tmp_path / "m.yaml"])
    with pytest.raises(ConfigError, match=r"command line: 'model' is a section \(enc_layers, .*given the value 3: set one of its keys"):
        load_config([], ["model=3"])


def test_unknown_key_in_the_wrong_section_names_the_right_one():
    with pytest.raises(ConfigError, match=r"unknown config key 'train.heads' \(did you mean 'model.heads'\?\)"):
        load_config(overrides=["train.heads=4"])
    with pytest.raises(ConfigError, match=r"unknown config key 'heads' \(did you mean 'model.heads'\?\)"):
        load_config(overrides=["heads=4"])  # in no section at all


def test_an_override_without_its_equals_sign_is_named_as_one(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"config file not found: model.heads \(an override is written KEY=VALUE"):
        load_config(["model.heads"])
    with pytest.raises(ConfigError, match=r"config file not found: missing.cfg$"):  # a file's name, not a section's key
        load_config(["missing.cfg"])


def test_a_merge_onto_a_config_names_its_source_and_the_key():
    """merge() is what every composed, rebuilt and saved config goes through: its errors name the source given."""
    merged = merge(OmegaConf.structured(ExperimentConfig), {"model": {"heads": "4"}}, "a.yaml")
    assert merged.model.heads == 4
    with pytest.raises(ConfigError, match=r"^a.yaml: bad value for 'model.heads'"):
        merge(merged, ["model.heads=four"], "a.yaml")


def test_duplicate_nested_key_names_the_file_the_key_and_both_lines(tmp_path):
    f = tmp_path / "exp.yaml"
    f.write_text("model:\n  heads: 4\n  d_model: 64\n  heads: 2\ntrain:\n  warmup: 10\n")
    with pytest.raises(ConfigError, match=r"exp.yaml: duplicate key 'heads' at lines 2 and 4"):
        load_config([f])


def test_unsafe_yaml_tags_are_refused(tmp_path):
    f = tmp_path / "evil.yaml"
    f.write_text("model: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match="evil.yaml"):
        load_config([f])


def test_missing_file_and_bad_override_syntax(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config([tmp_path / "nope.yaml"])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(overrides=["model.heads"])


@pytest.mark.parametrize("override", ["=4", ".heads=4", "model..heads=4", "model.heads.=4", "model.=4", " =4"])
def test_an_override_with_an_empty_key_or_key_part_is_named(override):
    """`=4` and `.heads=4` were "unknown config key '?'"; `model..heads=4` said a file nests its keys."""
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert str(e.value) == f"command line: override '{override}' has an empty key or key part: write key=value (e.g. model.heads=4)"


def test_round_trip_through_dict_and_yaml():
    cfg = load_config(overrides=["model.heads=4", "logging.tags=[a,b]"])
    assert from_dict(to_dict(cfg)) == cfg
    assert "heads: 4" in to_yaml(cfg)


def test_data_paths_are_kept_as_written_so_a_moved_project_reads_its_own_copy(tmp_path, monkeypatch):
    """Kept absolute, data.dir named the old checkout's folder: a project moved, or a study continued on another
    machine, could not evaluate or resume its runs. Relative to the cwd, a saved config reads the project's own data."""
    project = tmp_path / "project"
    (project / "experiments").mkdir(parents=True)
    (project / "experiments" / "exp.yaml").write_text("data:\n  dataset: files\n  train_prefix: data/train\n  dir: data\n")
    monkeypatch.chdir(project)
    cfg = load_config(["experiments/exp.yaml"], ["data.valid_prefix=data/valid"])
    assert (cfg.data.train_prefix, cfg.data.valid_prefix, cfg.data.dir) == ("data/train", "data/valid", "data")
    assert "train_prefix: data/train" in to_yaml(cfg)


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_experiment_file_loads(path):
    load_config([path])


@pytest.mark.parametrize(("value", "warned"), [(0, False), (5, True)])
def test_a_retired_key_in_a_file_or_a_saved_config_is_dropped_so_old_runs_still_load(tmp_path, caplog, value, warned):
    """train.debug_nan_step was a test aid (tests now inject faults through a plugin): a run that saved it loads."""
    path = tmp_path / "old.yaml"
    path.write_text(f"train:\n  debug_nan_step: {value}\n  max_steps: 9\n")
    with caplog.at_level(logging.WARNING, logger=retired.__name__):
        cfg = load_config([path])
    assert cfg.train.max_steps == 9 and not hasattr(cfg.train, "debug_nan_step")
    assert ("train.debug_nan_step=5 is ignored: the key is retired" in caplog.text) == warned, caplog.text
    saved = to_dict(cfg)
    saved["train"]["debug_nan_step"] = value
    assert from_dict(saved) == cfg
    with pytest.raises(ConfigError, match="unknown config key 'train.debug_nan_step'"):
        load_config(overrides=["train.debug_nan_step=3"])  # never offered anew


def bomb(levels: int) -> str:
    """A list of anchors each nine aliases of the one before: 9**levels values once expanded."""
    return "[&l0 [x, x, x, x, x, x, x, x, x], " + ", ".join(f"&l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)) + "]"


@pytest.mark.parametrize(
    "override, problem",
    [
        ("logging.tags=[a, b", "did not find expected ',' or ']'"),
        ("logging.tags={a: 1", "expected ',' or '}'"),
        ("logging.tags=!!python/object/apply:os.system [ls]", "could not determine a constructor"),
        ("logging.tags=!!python/name:os.system", "could not determine a constructor"),
        ("logging.tags={a: 1, a: 2}", "duplicate key 'a'"),
        ("logging.tags=" + "[" * 100 + "]" * 100, "nested"),
        ("logging.tags=" + bomb(7), "expan"),  # past ablate.files.yaml_file.MAX_VALUES
    ],
    ids=["open-list", "open-map", "python-object-tag", "python-name-tag", "duplicate-key", "deep", "bomb-size"],
)
def test_a_bad_override_value_is_named_like_a_files_never_a_yaml_traceback(override, problem):
    """Issue 38 item 8: the value of an override is read as a file's are (safe tags, no duplicate keys, no alias
    bombs, bounded nesting), and its error names the override."""
    with pytest.raises(ConfigError) as err:
        load_config(overrides=["model.heads=4", override])
    message = str(err.value)
    assert message.startswith(f"command line: override '{override}'"), message
    assert problem in message and "\n" not in message


def test_best_checkpoint_is_chosen_by_bleu_or_by_loss_without_it():
    assert load_config(overrides=[]).train.best_by == ("val/bleu", "max")
    assert load_config(overrides=["train.val_bleu=false"]).train.best_by == ("val/loss", "min")


@pytest.mark.parametrize("value", ["${}", "${model.d_ff", "${oc.env:NOPE"])
def test_a_malformed_interpolation_names_the_source_the_key_and_its_line(tmp_path, value):
    """OmegaConf's GrammarParseError escaped as a traceback, from the command line and from a file alike."""
    said = f": '{value}' is a malformed ${{...}} interpolation ("
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[f"model.d_model={value}"])
    assert str(e.value).startswith("command line: bad value for 'model.d_model'" + said), str(e.value)
    path = tmp_path / "exp.yaml"
    path.write_text(f"model:\n  heads: 2\n  d_model: '{value}'\n")
    with pytest.raises(ConfigError) as e:
        load_config([path])
    assert str(e.value).startswith(f"{path}: bad value for 'model.d_model' at line 3" + said), str(e.value)


@pytest.mark.parametrize(
    "value, why",
    [
        ("${model.nope}", "Interpolation key 'model.nope' not found"),
        ("${model.d_model}", "Recursive interpolation detected"),
        ("${oc.env:ABLATE_TEST_UNSET}", "Environment variable 'ABLATE_TEST_UNSET' not found"),
    ],
)
def test_an_interpolation_that_cannot_be_resolved_names_its_source_and_key(tmp_path, monkeypatch, value, why):
    """OmegaConf's multi-line text came out without the file or the override that set the key."""
    monkeypatch.delenv("ABLATE_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["model.heads=2", f"model.d_model={value}"])
    assert str(e.value).startswith(f"command line: bad value for 'model.d_model': '{value}' cannot be resolved (")
    assert why in str(e.value) and "\n" not in str(e.value)
    path = tmp_path / "exp.yaml"
    path.write_text(f"model:\n  heads: 2\n  d_model: '{value}'\n")
    with pytest.raises(ConfigError) as e:
        load_config([path], ["model.dropout=0.2"])
    assert str(e.value).startswith(f"{path}: bad value for 'model.d_model' at line 3: '{value}' cannot be resolved (")
    assert load_config([path], ["model.d_model=${model.d_ff}", "model.d_ff=64"]).model.d_model == 64  # the last setter's


def test_a_date_for_a_text_key_is_that_text_from_the_command_line_and_a_file(tmp_path):
    """`logging.name=2024-12-01` was OmegaConf's "Value 'date' is not a supported primitive type", no file or line."""
    path = tmp_path / "exp.yaml"
    path.write_text("logging:\n  tags: [2024-12-01, run]\n")
    cfg = load_config([path], ["logging.name=2024-12-01"])
    assert cfg.logging.name == "2024-12-01" and cfg.logging.tags == ["2024-12-01", "run"]


def test_an_out_dir_under_home_is_one_folder_there_from_a_file_or_the_command_line(tmp_path, monkeypatch):
    """Front-door review: `out_dir: ~/x` put the checkpoints in $HOME/x (Lightning expands it) and the rest in ./~/x,
    where --resume then found no checkpoint."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "exp.yaml").write_text("out_dir: ~/runs/x\n")
    assert load_config([tmp_path / "exp.yaml"]).out_dir == str(tmp_path / "home" / "runs" / "x")
    assert load_config(overrides=["out_dir=~/y"]).out_dir == str(tmp_path / "home" / "y")
    assert load_config(overrides=["out_dir=runs/~x"]).out_dir == "runs/~x"  # a tilde inside a name is a name


@pytest.mark.parametrize("text", ["", "# all commented out\n# model:\n#   heads: 4\n"])
def test_a_config_file_that_holds_nothing_is_refused_not_read_as_the_defaults(tmp_path, text):
    """Front-door review: an empty (cut short) file was "no changes", and `ablate train` trained the 48M defaults."""
    (tmp_path / "exp.yaml").write_text(text)
    with pytest.raises(ConfigError, match=f"^{tmp_path / 'exp.yaml'}: holds no settings \\(empty, or comments only\\)"):
        load_config([tmp_path / "exp.yaml"])
