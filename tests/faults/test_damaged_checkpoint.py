"""Issue 32 item 10: a checkpoint whose tokenizer or config field is damaged is an error naming the file and the field,
from every command that loads one (translate, evaluate, average; the table's test-split evaluation goes through
model_from_checkpoint), never a traceback ("could not parse ModelProto", AttributeError, KeyError)."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from checkpoints import tiny_checkpoint

from ablate.cli import main


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict:
    return tiny_checkpoint(tmp_path_factory.mktemp("good"))


def damaged(good: dict, field: str, value) -> dict:
    """`good` with `field` (dotted: hyper_parameters.config.model) set to `value`, or removed when value is DELETE."""
    ckpt = copy.deepcopy(good)
    *parents, last = field.split(".")
    holder = ckpt
    for key in parents:
        holder = holder[key]
    if value is DELETE:
        del holder[last]
    else:
        holder[last] = value
    return ckpt


DELETE = object()
DAMAGE = {
    "tokenizer-garbage": ("tokenizer_model", b"\x00\x01 not a SentencePiece model"),
    "tokenizer-truncated": ("tokenizer_model", "HALF"),
    "tokenizer-not-bytes": ("tokenizer_model", "spm.model"),
    "hyper_parameters-not-a-dict": ("hyper_parameters", "oops"),
    "config-missing": ("hyper_parameters.config", DELETE),
    "config-not-a-dict": ("hyper_parameters.config", ["model"]),
    "model-not-a-dict": ("hyper_parameters.config.model", "transformer"),
    "model-bad-value": ("hyper_parameters.config.model.d_model", "sixteen"),
    "vocab_size-missing": ("hyper_parameters.vocab_size", DELETE),
    "vocab_size-not-an-int": ("hyper_parameters.vocab_size", "64"),
}


NAMED = {"model-bad-value": "hyper_parameters.config does not load: bad value for 'model.d_model'"}  # the field, then its key


def write_damaged(tmp_path, good: dict, case: str):
    """The damaged checkpoint's path, and what its error must name besides the file."""
    field, value = DAMAGE[case]
    if value == "HALF":
        value = good["tokenizer_model"][: len(good["tokenizer_model"]) // 2]
    path = tmp_path / "damaged.ckpt"
    torch.save(damaged(good, field, value), path)
    return path, NAMED.get(case, f"field {field} is ")


def names_the_file_and_field(err: str, path, field: str) -> None:
    assert "Traceback" not in err, err[-2000:]
    assert f"{path}: " in err and field in err, err[-2000:]


@pytest.mark.parametrize("case", DAMAGE)
def test_translate_names_the_checkpoint_and_the_damaged_field(tmp_path, monkeypatch, capfd, good, case):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    path, field = write_damaged(tmp_path, good, case)
    (tmp_path / "in.txt").write_text("the dog runs\n")
    rc = main(["translate", str(path), "--input", str(tmp_path / "in.txt"), "--device", "cpu"])
    _, err = capfd.readouterr()
    assert rc == 2 and err.startswith("ablate translate: error: "), err[-2000:]
    names_the_file_and_field(err, path, field)


@pytest.mark.parametrize("case", ["tokenizer-truncated", "config-not-a-dict", "vocab_size-missing"])
def test_evaluate_names_the_checkpoint_and_the_damaged_field(tmp_path, monkeypatch, capfd, good, case):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    path, field = write_damaged(tmp_path, good, case)
    (tmp_path / "src.txt").write_text("the dog runs\n")
    (tmp_path / "ref.txt").write_text("godx snurx\n")
    rc = main(["evaluate", str(path), "--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt"), "--device", "cpu"])
    _, err = capfd.readouterr()
    assert rc == 2 and err.startswith("ablate evaluate: error: "), err[-2000:]
    names_the_file_and_field(err, path, field)


@pytest.mark.parametrize("case", ["config-missing", "model-not-a-dict", "hyper_parameters-not-a-dict"])
def test_average_names_the_checkpoint_and_the_damaged_field(tmp_path, capfd, good, case):
    torch.save(good, tmp_path / "a.ckpt")
    path, field = write_damaged(tmp_path, good, case)
    rc = main(["average", str(tmp_path / "a.ckpt"), str(path), "--output", str(tmp_path / "avg.ckpt")])
    _, err = capfd.readouterr()
    assert rc == 2 and err.startswith("ablate average: error: "), err[-2000:]
    names_the_file_and_field(err, path, field)
    assert not (tmp_path / "avg.ckpt").exists()


def test_the_table_evaluation_loader_names_the_checkpoint_and_the_field(tmp_path, monkeypatch, good):
    from ablate.training.checkpoint import CheckpointError, model_from_checkpoint

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    path, field = write_damaged(tmp_path, good, "tokenizer-garbage")
    with pytest.raises(CheckpointError) as err:
        model_from_checkpoint(path)
    names_the_file_and_field(str(err.value), path, field)
    assert not list((tmp_path / "cache").rglob("*.model"))  # the damaged bytes are not kept as a cached tokenizer


@pytest.mark.slow  # a subprocess importing torch: seconds; the default set stays under a minute
def test_translate_in_a_subprocess_prints_no_traceback(tmp_path, good):
    path, field = write_damaged(tmp_path, good, "tokenizer-truncated")
    env = {"ABLATE_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "ablate.cli", "translate", str(path), "--device", "cpu"]
    proc = subprocess.run(cmd, input="the dog runs\n", capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    names_the_file_and_field(proc.stderr, path, field)
