"""The one YAML reader: safe loading, and every problem as a ConfigError naming the file (and line, and key)."""

from __future__ import annotations

import re

import pytest

from ablate.files.yaml_file import read_yaml
from ablate.messages.errors import ConfigError


def write(tmp_path, text: str, name: str = "sweep.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reads_nested_mappings_and_lists(tmp_path):
    path = write(tmp_path, "base: experiments/base.yaml\nparams:\n  model.heads: {type: categorical, choices: [1, 4]}\n")
    assert read_yaml(path) == {"base": "experiments/base.yaml", "params": {"model.heads": {"type": "categorical", "choices": [1, 4]}}}
    assert read_yaml(write(tmp_path, "", "empty.yaml")) is None


def test_numbers_are_yaml_1_1_s_but_no_base_60_and_an_exponent_without_a_dot(tmp_path):
    """No base-60 (PyYAML's `1:00:00:00` is 216000), and an exponent without a dot is a number (`1e-3`), as OmegaConf
    reads a command line's values; a quoted value, a key (a row named `1e-3`) and YAML 1.1's other forms (`08` text,
    `017` octal) stay as they were."""
    text = "a: 1:00:00:00\nb: '1e-3'\nc: [1e-3, -2E+5, .5, 3., 12, 0x1F, .inf, 12abc, 08, 017]\nd: 190:20:30.15\n1e-3: {x: 1}\n"
    got = read_yaml(write(tmp_path, text))
    assert got == {
        "a": "1:00:00:00",
        "b": "1e-3",
        "c": [0.001, -200000.0, 0.5, 3.0, 12, 31, float("inf"), "12abc", "08", 15],
        "d": "190:20:30.15",
        "1e-3": {"x": 1},
    }
    assert [type(v) for v in got["c"][:5]] == [float, float, float, float, int]


def test_duplicate_top_level_key_names_the_key_and_both_lines(tmp_path):
    path = write(tmp_path, "base: a.yaml\nmetric: val/bleu\n\n# another\n\n\nbase: b.yaml\n")
    with pytest.raises(ConfigError, match=r"sweep.yaml: duplicate key 'base' at lines 1 and 7"):
        read_yaml(path)


@pytest.mark.parametrize("text, key, lines", [
    ("params:\n  model.heads:\n    type: int\n    low: 1\n    low: 2\n", "low", "lines 4 and 5"),
    ("rows:\n  - name: a\n    name: b\n", "name", "lines 2 and 3"),
    ("a: {x: 1, x: 2}\n", "x", "line 1 (twice)"),
])  # fmt: skip
def test_duplicate_keys_at_any_depth_are_refused(tmp_path, text, key, lines):
    with pytest.raises(ConfigError, match=rf"sweep.yaml: duplicate key '{key}' at {re.escape(lines)}"):
        read_yaml(write(tmp_path, text))


def test_same_key_in_different_mappings_and_merge_keys_are_fine(tmp_path):
    text = "a: {low: 1}\nb: {low: 2}\nbase: &base {x: 1, y: 2}\nrow:\n  <<: *base\n  x: 3\n"
    assert read_yaml(write(tmp_path, text))["row"] == {"x": 3, "y": 2}


def test_missing_file_names_what_and_where(tmp_path):
    with pytest.raises(ConfigError, match=r"^sweep file not found: .*nope.yaml$"):
        read_yaml(tmp_path / "nope.yaml", "sweep file")
    with pytest.raises(ConfigError, match=r"^config file not found"):
        read_yaml(tmp_path / "nope.yaml")


def test_invalid_yaml_names_file_and_line(tmp_path):
    with pytest.raises(
        ConfigError, match=r"bad.yaml: not valid \(safe\) YAML at line 3: while parsing a flow sequence; (did not find )?expected"
    ):
        read_yaml(write(tmp_path, "a: 1\nb: [1, 2\nc: 3\n", "bad.yaml"))


def test_tags_that_build_python_objects_are_refused(tmp_path):
    message = r"evil.yaml: not valid \(safe\) YAML at line 1: could not determine a constructor for the tag .*python/object"
    with pytest.raises(ConfigError, match=message):
        read_yaml(write(tmp_path, "model: !!python/object/apply:os.system ['echo pwned']\n", "evil.yaml"))


def test_an_alias_bomb_is_refused_before_anything_expands_it(tmp_path):
    levels = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]  # 9**9 values once expanded
    with pytest.raises(ConfigError, match=r"bomb.yaml: its aliases \(\*name\) expand to more than 100,000 values \(at line 6\)"):
        read_yaml(write(tmp_path, "\n".join(levels) + "\n", "bomb.yaml"))


@pytest.mark.parametrize(
    "text", ["deep: " + "[" * 5000 + "]" * 5000, "deep: " + "{a: " * 5000 + "1" + "}" * 5000, "deep: " + "[" * 80 + "]" * 80]
)
def test_nesting_deeper_than_any_config_is_refused_naming_the_file(tmp_path, text):
    with pytest.raises(ConfigError, match=r"deep.yaml: nested (too deeply to read|more than 64 levels deep at line 1)"):
        read_yaml(write(tmp_path, text, "deep.yaml"))


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"loop.yaml: the value anchored at line 1 holds an alias of itself"):
        read_yaml(write(tmp_path, "a: &a\n  - *a\n", "loop.yaml"))


def test_invalid_utf8_names_the_file_line_and_column(tmp_path):
    path = tmp_path / "bytes.yaml"
    path.write_bytes(b"model:\n  heads: 4\n  norm: pr\xe9\n")
    with pytest.raises(ConfigError, match=r"bytes.yaml: not UTF-8 text at line 3, column 11 \(bytes b'\\xe9\\n'\)"):
        read_yaml(path)


def test_key_line_finds_a_nested_or_whole_dotted_key_and_none_elsewhere(tmp_path):
    from ablate.files.yaml_file import key_line

    f = tmp_path / "k.yaml"
    f.write_text("# a comment\nmodel:\n  haeds: 2\ntrain:\n  lr: 1\n  max_step: 3\nmodel.heads: 4\n")
    assert [key_line(f, k) for k in ("model.haeds", "train.max_step", "model.heads", "model")] == [3, 6, 7, 2]
    assert key_line(f, "train.nope") is None and key_line(f, "nope") is None and key_line(tmp_path / "gone.yaml", "a") is None
    (tmp_path / "bad.yaml").write_text("a: [\n")
    assert key_line(tmp_path / "bad.yaml", "a") is None


def test_key_text_is_a_value_as_written_and_none_for_a_list_or_a_missing_key(tmp_path):
    from ablate.files.yaml_file import key_text

    f = tmp_path / "c.yaml"
    f.write_text("train:\n  max_steps: 1e3\n  betas: [0.9, 0.98]\nmodel.heads: 0x10\n")
    assert [key_text(f, k) for k in ("train.max_steps", "model.heads", "train.betas", "train.nope")] == ["1e3", "0x10", None, None]


def test_a_date_or_time_is_read_as_text_as_yaml_1_2_reads_it(tmp_path):
    """PyYAML's YAML 1.1 made `2024-12-01` a date, which OmegaConf refused as "Value 'date' is not a supported primitive
    type", naming neither the file nor the line; implicit or tagged, in a value, a list or a key, it is the text."""
    text = "name: 2024-12-01\ntags: [2024-12-01, 2001-12-14t21:59:43.10-05:00]\n2024-01-02: {x: !!timestamp 2024-01-03}\n"
    assert read_yaml(write(tmp_path, text)) == {
        "name": "2024-12-01",
        "tags": ["2024-12-01", "2001-12-14t21:59:43.10-05:00"],
        "2024-01-02": {"x": "2024-01-03"},
    }
