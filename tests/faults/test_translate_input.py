"""Issue 32 item 9: `ablate translate` input. Invalid UTF-8 on stdin is an error naming stdin and the line (as it is
from a file), never a traceback; a line longer than the model takes is translated from its first tokens with a
warning naming the line and both lengths, never cut without a word."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from checkpoints import tiny_checkpoint

from ablate.cli import main

LONG = ("the dog runs " * 7700).strip()  # 100,099 characters


@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    """A checkpoint of a model with learned positions: 64 at most, so a source keeps 63 tokens and EOS."""
    folder = tmp_path_factory.mktemp("bounded")
    path = folder / "m.ckpt"
    torch.save(tiny_checkpoint(folder, data={"max_len": 64}, positional="learned", max_positions=64), path)
    return path


def translate(ckpt, stdin: bytes, **env) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ablate.cli", "translate", str(ckpt), "--device", "cpu"]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=300, env={**os.environ, **env})


@pytest.mark.parametrize(
    "env",
    [{}, {"LC_ALL": "C"}, {"PYTHONIOENCODING": "utf-8"}],
    ids=["default", "C-locale", "strict-utf8"],
)
@pytest.mark.slow  # subprocesses importing torch: seconds each; the default set stays under a minute
def test_invalid_utf8_on_stdin_names_stdin_and_the_line(tmp_path, bounded, env):
    proc = translate(bounded, b"the dog runs\nthe cat \xff\xfe sleeps\n", ABLATE_CACHE=str(tmp_path / "cache"), **env)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err, err[-2000:]
    assert err.startswith("ablate translate: error: stdin:2: not valid UTF-8 (bytes b'\\xff\\xfe s' at column 9)"), err
    assert proc.stdout == b""  # nothing translated from input that cannot be read


def test_a_line_longer_than_the_model_takes_is_translated_with_a_warning_naming_it(tmp_path, monkeypatch, capfd, bounded):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "in.txt"
    source.write_text(f"the dog runs\n{LONG}\nthe cat sleeps\n")
    rc = main(["translate", str(bounded), "--input", str(source), "--device", "cpu"])
    out, err = capfd.readouterr()
    assert rc == 0 and len(out.splitlines()) == 3  # every line translated, in order
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1, err
    assert f"{source}:2 has 69,300 subword tokens; translated from its first 63 only" in warning[0], warning
    assert "model.max_positions=64" in warning[0]


@pytest.mark.slow  # a subprocess importing torch: seconds; the default set stays under a minute
def test_a_long_line_on_stdin_is_named_as_stdins(tmp_path, bounded):
    proc = translate(bounded, f"{LONG}\n".encode(), ABLATE_CACHE=str(tmp_path / "cache"))
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "stdin:1 has 69,300 subword tokens; translated from its first 63 only" in err, err[-2000:]
    assert len(proc.stdout.decode().splitlines()) == 1
