"""Numeric flags (`ablate.messages.flag_types.Number`): a value out of range or not a number is argparse's usage
error naming the flag, so no bad number reaches a command."""

from __future__ import annotations

import argparse

import pytest

from ablate.messages.flag_types import Number, add_plugins_flag


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ablate x")
    p.add_argument("--beam", type=Number(int, 1))
    p.add_argument("--alpha", type=Number(float, 0.0, 1.0))
    return p


@pytest.mark.parametrize(
    "argv, value", [(["--beam", "4"], ("beam", 4)), (["--alpha", "0.25"], ("alpha", 0.25)), (["--alpha", "1"], ("alpha", 1.0))]
)
def test_a_value_in_range_comes_back_as_its_kind(argv, value):
    got = getattr(parser().parse_args(argv), value[0])
    assert got == value[1] and type(got) is type(value[1])


@pytest.mark.parametrize("argv, message", [
    (["--beam", "0"], "argument --beam: 0 must be an integer >= 1"),
    (["--beam", "2.5"], "argument --beam: '2.5' is not an integer"),
    (["--alpha", "1.5"], "argument --alpha: 1.5 must be a number from 0.0 to 1.0"),
    (["--alpha", "nan"], "argument --alpha: nan must be a number from 0.0 to 1.0"),
    (["--alpha", "inf"], "argument --alpha: inf must be a number from 0.0 to 1.0"),
    (["--alpha", "x"], "argument --alpha: 'x' is not a number"),
])  # fmt: skip
def test_a_bad_value_is_a_usage_error_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as exit:
        parser().parse_args(argv)
    assert exit.value.code == 2
    assert message in capsys.readouterr().err


def test_plugins_taken_before_a_positional_refuse_it_naming_it(tmp_path, monkeypatch, capsys):
    """`--plugins` takes every value after it: `--plugins x.py CKPT` swallowed the checkpoint, and argparse then said
    only that the checkpoint was missing."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "study").mkdir()
    (tmp_path / "nspkg").mkdir()  # a namespace package (modules, no __init__.py): a module name, taken
    (tmp_path / "nspkg" / "variants.py").write_text("")
    parser = argparse.ArgumentParser(prog="ablate table")
    parser.add_argument("study")
    add_plugins_flag(parser, "plugins")
    assert parser.parse_args(["study", "--plugins", "a.py", "pkg.mod", "nspkg"]).plugins == ["a.py", "pkg.mod", "nspkg"]
    for swallowed in ("study", "runs/h8/checkpoints/best.ckpt", "best.ckpt", "runs/x"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--plugins", "a.py", swallowed])
        assert f"argument --plugins: {swallowed} is not a plugin (a .py file or a module name)" in capsys.readouterr().err
