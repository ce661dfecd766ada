"""Reading checkpoints safely, atomic saves, rebuilding a model from a checkpoint, weight averaging and the order of
a run's step checkpoints."""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import re
import struct
import subprocess
import sys
import zipfile

import pytest
import torch
from helpers import tiny_model, write_corpus

from ablate.config import DataConfig, ExperimentConfig, to_dict
from ablate.data.tokenizer import load_or_train_tokenizer
from ablate.model import build_transformer
from ablate.training.checkpoint import (
    CheckpointError,
    average_checkpoints,
    checkpoint_config,
    load_checkpoint,
    model_from_checkpoint,
    save_atomic,
    step_checkpoints,
    tokenizer_from_checkpoint,
)
from ablate.training.commands import average_cli


def ckpt(weight: torch.Tensor, step: int = 1, model: dict | None = None, **extra) -> dict:
    """A minimal ablate-shaped checkpoint: weights, hyper-parameters with a config, training state."""
    return {
        "state_dict": {"model.w": weight, "model.count": torch.tensor(step)},
        "hyper_parameters": {"config": {"model": model or {"d_model": 16}}, "vocab_size": 8},
        "global_step": step,
        "optimizer_states": [{"state": {}}],
        "lr_schedulers": [{}],
        "loops": {},
        "callbacks": {},
        **extra,
    }


def write(path, obj) -> os.PathLike:
    torch.save(obj, path)
    return path


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# --- load_checkpoint ----------------------------------------------------------------------------------------------


def test_load_checkpoint_reads_an_ablate_checkpoint_eagerly_or_mmapped(tmp_path):
    path = write(tmp_path / "a.ckpt", ckpt(torch.arange(6.0), step=3))
    for mmap in (False, True):
        loaded = load_checkpoint(path, mmap=mmap)
        assert loaded["global_step"] == 3 and torch.equal(loaded["state_dict"]["model.w"], torch.arange(6.0))


def test_load_checkpoint_refuses_a_missing_file_naming_it(tmp_path):
    with pytest.raises(CheckpointError, match=f"checkpoint not found: {tmp_path / 'gone.ckpt'}"):
        load_checkpoint(tmp_path / "gone.ckpt")
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "checkpoints" / "best.ckpt").touch()
    (tmp_path / "run" / "checkpoints" / "last.ckpt").touch()
    for given in (tmp_path / "run", tmp_path / "run" / "checkpoints"):  # the run, or its checkpoints/ folder
        with pytest.raises(CheckpointError, match=r"is a folder, not a checkpoint: give a file, such as .*/run/checkpoints/best.ckpt \("):
            load_checkpoint(given)
    # a best.ckpt not there (a run shorter than its validation interval has last.ckpt alone): what is, is named
    (tmp_path / "run" / "checkpoints" / "best.ckpt").unlink()
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tmp_path / "run" / "checkpoints" / "best.ckpt")
    assert str(e.value) == f"checkpoint not found: {tmp_path}/run/checkpoints/best.ckpt ({tmp_path}/run/checkpoints holds last.ckpt)"
    with pytest.raises(CheckpointError, match="is a folder, not a checkpoint: .*checkpoints holds no checkpoint"):
        load_checkpoint(tmp_path)
    assert issubclass(CheckpointError, ValueError)  # so the CLI reports it as a user error


def test_load_checkpoint_refuses_a_truncated_file_naming_it(tmp_path):
    good = write(tmp_path / "good.ckpt", ckpt(torch.randn(200)))
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    for mmap in (False, True):
        with pytest.raises(CheckpointError) as e:
            load_checkpoint(cut, mmap=mmap)
        assert (
            str(e.value)
            == f"{cut}: not a readable checkpoint (cut short: a zip archive without its end, from a save or a copy stopped midway)"
        )


@pytest.mark.parametrize("mmap", [True, False], ids=["mmap", "eager"])
def test_load_checkpoint_refuses_an_empty_file_naming_it(tmp_path, mmap):
    (tmp_path / "empty.ckpt").write_bytes(b"")  # e.g. a save cut off by a full disk before its first byte
    with pytest.raises(CheckpointError, match="empty.ckpt: not a readable checkpoint"):
        load_checkpoint(tmp_path / "empty.ckpt", mmap=mmap)


@pytest.mark.parametrize(
    "content", [{"weights": torch.ones(2)}, [1, 2, 3], {"state_dict": {}}], ids=["no-state-dict", "not-a-dict", "no-hyper-parameters"]
)
def test_load_checkpoint_refuses_a_torch_file_that_is_not_an_ablate_checkpoint(tmp_path, content):
    path = write(tmp_path / "other.ckpt", content)
    with pytest.raises(CheckpointError, match=f"{path}: not an ablate checkpoint"):
        load_checkpoint(path)


def test_load_checkpoint_refuses_text_and_pickled_objects_without_running_them(tmp_path):
    text = tmp_path / "notes.ckpt"
    for content in ("hello", "garbage"):  # "garbage" torch calls an unpickling error, and an mmap error when mmapped
        text.write_text(content)
        for mmap in (False, True):
            with pytest.raises(CheckpointError) as e:
                load_checkpoint(text, mmap=mmap)
            assert str(e.value) == f"{text}: not a readable checkpoint (a torch checkpoint is a zip archive, this file is not one)"
    obj = write(tmp_path / "obj.ckpt", {"state_dict": {}, "hyper_parameters": argparse.Namespace(a=1)})
    with pytest.raises(CheckpointError, match="obj.ckpt: holds Python objects that ablate will not unpickle"):
        load_checkpoint(obj)


# --- save_atomic --------------------------------------------------------------------------------------------------


def test_save_atomic_writes_the_object_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "last.ckpt"
    save_atomic(ckpt(torch.ones(3), step=1), path)
    save_atomic(ckpt(torch.zeros(3), step=2), path)  # replaces the earlier file
    assert load_checkpoint(path)["global_step"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


class FailsMidway:
    """Pickling it raises, after torch.save has opened and begun the file."""

    def __reduce__(self):
        raise RuntimeError("disk full")


def test_save_atomic_failing_midway_keeps_the_old_file_and_removes_its_temp(tmp_path):
    path = write(tmp_path / "last.ckpt", ckpt(torch.ones(3), step=1))
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="disk full"):
        save_atomic({"state_dict": {"w": torch.ones(1000)}, "bad": FailsMidway()}, path)
    assert path.read_bytes() == before and leftovers(tmp_path) == []


def test_save_atomic_under_dev_shm_replaces_the_file_whole(shm_dir):
    """A save to /dev/shm (a tmpfs, taken for a stream by its /dev/ prefix) was written in place: a kill -9 left a
    0-byte checkpoint, and one failing midway half of one."""
    path = write(shm_dir / "last.ckpt", ckpt(torch.ones(3), step=1))
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="disk full"):
        save_atomic({"state_dict": {"w": torch.ones(1000)}, "bad": FailsMidway()}, path)
    assert path.read_bytes() == before and leftovers(shm_dir) == []


# --- model and tokenizer from a checkpoint ------------------------------------------------------------------------


@pytest.fixture
def spm_bytes(tmp_path, monkeypatch) -> bytes:
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    corpus = write_corpus(tmp_path / "corpus", n_valid=1, n_test=1)
    data = DataConfig(dataset="files", vocab_size=64, cache_dir=str(tmp_path / "tok"))
    return load_or_train_tokenizer(data, corpus / "train.en", corpus / "train.de").path.read_bytes()


def trained_checkpoint(model_cfg, vocab: int, spm: bytes | None) -> tuple[dict, torch.nn.Module]:
    model = build_transformer(model_cfg, vocab)
    cfg = to_dict(ExperimentConfig(model=model_cfg))
    out = {"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}, "hyper_parameters": {"config": cfg, "vocab_size": vocab}}
    if spm is not None:
        out["tokenizer_model"] = spm
    return out, model


def test_model_from_checkpoint_rebuilds_weights_config_and_tokenizer(tmp_path, spm_bytes):
    saved, model = trained_checkpoint(tiny_model(enc_layers=1, dec_layers=1), 64, spm_bytes)
    path = write(tmp_path / "m.ckpt", saved)
    rebuilt, cfg, tok = model_from_checkpoint(path)
    assert cfg.model == tiny_model(enc_layers=1, dec_layers=1) and not rebuilt.training
    assert rebuilt.state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(rebuilt.state_dict()[k], v) for k, v in model.state_dict().items())
    assert tok.vocab_size == 64 and tok.decode(tok.encode(["the dog"])) == ["the dog"]
    assert tok.path.is_relative_to(tmp_path / "cache")  # the cache, not wherever the tokenizer was trained
    again = tokenizer_from_checkpoint(saved)
    assert again.path == tok.path  # content-addressed: written once


@pytest.mark.parametrize("damage", [b"", b"\x00garbage", "half"], ids=["empty", "garbage", "half"])
def test_a_damaged_cached_copy_of_a_checkpoints_tokenizer_is_written_again(tmp_path, spm_bytes, damage):
    saved, _ = trained_checkpoint(tiny_model(enc_layers=1, dec_layers=1), 64, spm_bytes)
    cached = tokenizer_from_checkpoint(saved).path
    cached.write_bytes(spm_bytes[: len(spm_bytes) // 2] if damage == "half" else damage)
    again = tokenizer_from_checkpoint(saved)  # not "field tokenizer_model is damaged": the checkpoint is sound
    assert again.path == cached and cached.read_bytes() == spm_bytes and again.decode(again.encode(["the dog"])) == ["the dog"]


def test_model_from_checkpoint_warns_of_a_plugin_file_edited_since_training_and_goes_on(tmp_path, spm_bytes, monkeypatch, caplog):
    from ablate import plugins

    monkeypatch.setattr(plugins, "_imported", {})
    monkeypatch.setattr(plugins, "_hashes", {})
    from ablate.model.activations import ACTIVATIONS
    from ablate.registry import restoring

    plugin = tmp_path / "mine.py"
    source = "import torch\nfrom ablate.model.activations import ACTIVATIONS\nfrom ablate.registry import register\n\n\n"
    source += '@register(ACTIVATIONS, "ck_square")\nclass Square(torch.nn.Module):\n    def forward(self, x):\n        return x * x\n'
    plugin.write_text(source)
    then, now = hashlib.sha256(source.replace("x * x", "x.relu()").encode()).hexdigest(), hashlib.sha256(source.encode()).hexdigest()
    with restoring(ACTIVATIONS):
        plugins.load_plugins([str(plugin)])  # what --plugins does
        saved, _ = trained_checkpoint(tiny_model(enc_layers=1, dec_layers=1, activation="ck_square"), 64, spm_bytes)
        path = write(tmp_path / "m.ckpt", {**saved, plugins.PLUGIN_HASHES: {str(plugin): then}})
        with caplog.at_level(logging.WARNING, logger="ablate"):
            assert model_from_checkpoint(path)[2].vocab_size == 64
        assert [r.getMessage() for r in caplog.records] == [
            f"checkpoint {path}: plugin {plugin} changed since training (sha256 {then[:12]} then, {now[:12]} now); going on with it as it is now"
        ]
        caplog.clear()
        model_from_checkpoint(write(tmp_path / "same.ckpt", {**saved, plugins.PLUGIN_HASHES: {str(plugin): now}}))
        model_from_checkpoint(write(tmp_path / "old.ckpt", saved))  # saved before checkpoints recorded plugins: unknown
        own, _ = trained_checkpoint(tiny_model(enc_layers=1, dec_layers=1), 64, spm_bytes)  # none of the plugin's variants
        model_from_checkpoint(write(tmp_path / "own.ckpt", {**own, plugins.PLUGIN_HASHES: {str(plugin): then}}))
    assert caplog.records == []


def test_model_from_checkpoint_refuses_weights_that_do_not_fit_the_config(tmp_path, spm_bytes):
    saved, _ = trained_checkpoint(tiny_model(enc_layers=1, dec_layers=1), 64, spm_bytes)
    saved["hyper_parameters"]["config"]["model"]["d_ff"] = 48
    path = write(tmp_path / "m.ckpt", saved)
    with pytest.raises(CheckpointError, match=f"{path}: weights do not fit the saved config") as err:
        model_from_checkpoint(path)
    message = str(err.value)  # torch's first line alone named no key
    assert "(size mismatch for encoder.0.ff." in message and "the shape in current model is torch.Size([48" in message
    assert message.endswith(" more)") and len(message) < 600


def test_a_checkpoint_without_a_tokenizer_is_refused_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    saved, _ = trained_checkpoint(tiny_model(enc_layers=1, dec_layers=1), 64, None)
    path = write(tmp_path / "m.ckpt", saved)
    with pytest.raises(CheckpointError, match=f"{path}: holds no tokenizer"):
        model_from_checkpoint(path)


# --- averaging ----------------------------------------------------------------------------------------------------


def test_average_checkpoints_means_float_weights_and_keeps_the_rest_of_the_last(tmp_path):
    paths = [write(tmp_path / f"step={s}.ckpt", ckpt(torch.tensor([1.0, 2.0]) * s, step=s, note=s)) for s in (1, 2, 6)]
    avg = average_checkpoints(paths)
    torch.testing.assert_close(avg["state_dict"]["model.w"], torch.tensor([3.0, 6.0]))
    assert torch.equal(avg["state_dict"]["model.count"], torch.tensor(6))  # integer tensors: the last one's
    assert avg["global_step"] == 6 and avg["note"] == 6
    assert avg["averaged_from"] == [str(p) for p in paths]
    assert not {"optimizer_states", "lr_schedulers", "callbacks", "loops"} & set(avg)  # weights only


def test_average_checkpoints_keeps_the_dtype_and_averages_in_double(tmp_path):
    big = torch.tensor([60000.0, 1.0], dtype=torch.float16)
    paths = [write(tmp_path / f"{i}.ckpt", ckpt(big, step=i)) for i in range(2)]  # fp16 sum would overflow
    out = average_checkpoints(paths)["state_dict"]["model.w"]
    assert out.dtype == torch.float16 and torch.equal(out, big)


@pytest.mark.parametrize(
    ("state", "says"),
    [([1, 2], "(a list, not a mapping)"), ({"model.w": 3}, "('model.w' is not a tensor: 3)")],
)
def test_average_checkpoints_refuses_damaged_weights_naming_the_file(tmp_path, state, says):
    good = write(tmp_path / "a.ckpt", ckpt(torch.ones(3)))
    bad = write(tmp_path / "b.ckpt", {**ckpt(torch.ones(3)), "state_dict": state})
    for paths in ([good, bad], [bad, good]):
        with pytest.raises(CheckpointError, match=re.escape(f"{bad}: field state_dict is damaged {says}")):
            average_checkpoints(paths)


def test_average_checkpoints_refuses_different_models_and_no_input(tmp_path):
    a = write(tmp_path / "a.ckpt", ckpt(torch.ones(2), step=1))
    b = write(tmp_path / "b.ckpt", ckpt(torch.ones(2), step=2, model={"d_model": 32}))
    with pytest.raises(CheckpointError, match=f"{a}: a different model from {b}"):
        average_checkpoints([a, b])
    c = ckpt(torch.ones(2), step=3)
    c["state_dict"]["model.extra"] = torch.ones(1)
    c = write(tmp_path / "c.ckpt", c)
    with pytest.raises(CheckpointError, match="a different model"):
        average_checkpoints([c, a])
    with pytest.raises(CheckpointError, match="no checkpoints to average"):
        average_checkpoints([])
    # The same model section over another vocabulary (data.vocab_size): other shapes, or the same with other tokens.
    wide = write(tmp_path / "wide.ckpt", ckpt(torch.ones(3), step=4))
    with pytest.raises(CheckpointError, match=f"{wide}: a different model from {a}"):
        average_checkpoints([wide, a])
    other = write(tmp_path / "other.ckpt", {**ckpt(torch.ones(2), step=5), "tokenizer_model": b"another"})
    with pytest.raises(CheckpointError, match=f"{other}: another tokenizer than {a}'s"):
        average_checkpoints([other, a])


def test_average_checkpoints_refuses_another_runs_and_a_step_counted_twice(tmp_path):
    """Seeds of one model on one corpus, or a group's members, pass the shape and tokenizer checks; a mean of their
    weights is no run's. A checkpoint named twice, or last.ckpt beside the step=N.ckpt of its step, would weigh double."""

    def run_ckpt(name, step, seed=1, index=None):
        saved = ckpt(torch.full((2,), float(step)), step=step)
        saved["hyper_parameters"]["config"] |= {"seed": seed, "members": {"size": 2 if index is not None else 1, "index": index}}
        return write(tmp_path / name, saved)

    a, b = run_ckpt("a.ckpt", 1), run_ckpt("b.ckpt", 2)
    assert average_checkpoints([a, b])["global_step"] == 2
    other_seed = run_ckpt("s2.ckpt", 3, seed=2)
    with pytest.raises(CheckpointError, match=re.escape(f"{other_seed}: another run than {b}'s (seed 2, member None; not seed 1")):
        average_checkpoints([other_seed, b])
    member0, member1 = run_ckpt("m0.ckpt", 1, index=0), run_ckpt("m1.ckpt", 2, seed=1, index=1)
    with pytest.raises(CheckpointError, match="another run than"):
        average_checkpoints([member0, member1])
    with pytest.raises(CheckpointError, match=re.escape(f"{a}: the same file as {a}, so it would count twice")):
        average_checkpoints([a, b, a])
    last = run_ckpt("last.ckpt", 2)
    with pytest.raises(CheckpointError, match=re.escape(f"{last}: step 2, as does {b}, so it would count twice")):
        average_checkpoints([a, b, last])


def test_average_checkpoints_tells_two_runs_of_one_seed_and_model_apart_by_their_run_ids(tmp_path):
    """Rows differing only in train.* have one seed and model; only the run id a checkpoint carries tells them apart.
    A checkpoint saved before run ids (a run resumed across that version) is judged by its seed alone."""

    def saved(name, step, run_id):
        return write(tmp_path / name, {**ckpt(torch.full((2,), float(step)), step=step), **({"run_id": run_id} if run_id else {})})

    a, b, c = saved("a.ckpt", 1, "a" * 32), saved("b.ckpt", 2, "a" * 32), saved("c.ckpt", 3, "c" * 32)
    assert average_checkpoints([a, b])["global_step"] == 2
    with pytest.raises(
        CheckpointError,
        match=re.escape(f"{c}: another run than {b}'s (the same seed and model, trained apart: run id cccccccc, not aaaaaaaa)"),
    ):
        average_checkpoints([a, c, b])
    old = saved("old.ckpt", 4, None)
    assert average_checkpoints([old, a, b])["global_step"] == 2
    damaged = write(tmp_path / "d.ckpt", {**ckpt(torch.full((2,), 5.0), step=5), "run_id": 7})  # unknown, not a TypeError
    assert average_checkpoints([damaged, a, b])["global_step"] == 2


# --- step checkpoints and `ablate average` -------------------------------------------------------------------------


def test_step_checkpoints_are_ordered_by_step_number_not_name(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name in (
        "step=10.ckpt",
        "step=9.ckpt",
        "step=100.ckpt",
        "last.ckpt",
        "best.ckpt",
        "step=x.ckpt",
        "step=5.ckpt.tmp",
        ".step=7.ckpt.abc.tmp",
    ):
        (folder / name).write_bytes(b"")
    assert [p.name for p in step_checkpoints(tmp_path)] == ["step=9.ckpt", "step=10.ckpt", "step=100.ckpt"]
    assert step_checkpoints(tmp_path / "nowhere") == []


def average_args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"checkpoints": [], "run_dir": None, "last": 5, "force": False, **kw})


def test_average_cli_averages_the_last_k_of_a_run_and_refuses_to_overwrite(tmp_path, capsys):
    (tmp_path / "checkpoints").mkdir()
    for s in (1, 2, 9, 10, 11):  # by name, the last two would be step=2 and step=9
        write(tmp_path / "checkpoints" / f"step={s}.ckpt", ckpt(torch.full((2,), float(s)), step=s))
    out = tmp_path / "avg.ckpt"
    assert average_cli(average_args(run_dir=str(tmp_path), last=2, output=str(out))) == 0
    torch.testing.assert_close(load_checkpoint(out)["state_dict"]["model.w"], torch.full((2,), 10.5))
    assert "averaged 2 checkpoints" in capsys.readouterr().out
    with pytest.raises(ValueError, match=f"--output {out} already exists; pass --force to write over it"):
        average_cli(average_args(run_dir=str(tmp_path), last=2, output=str(out)))
    assert average_cli(average_args(run_dir=str(tmp_path), last=3, output=str(out), force=True)) == 0
    torch.testing.assert_close(load_checkpoint(out)["state_dict"]["model.w"], torch.full((2,), 10.0))
    one = tmp_path / "checkpoints" / "step=11.ckpt"
    with pytest.raises(ValueError, match=f"--output {one} is the input checkpoint {one}: writing it would replace the input"):
        average_cli(average_args(checkpoints=[str(one)], output=str(one), force=True))
    (tmp_path / "hard.ckpt").hardlink_to(one)  # the same file by another name counts too
    with pytest.raises(ValueError, match="is the input checkpoint"):
        average_cli(average_args(checkpoints=[str(one)], output=str(tmp_path / "hard.ckpt"), force=True))


@pytest.mark.slow  # a whole `ablate` command (seconds): the default set stays under a minute
def test_average_to_stdout_writes_the_checkpoint_alone_and_its_report_to_stderr(tmp_path):
    """`ablate average ... -o /dev/stdout > avg.ckpt` wrote its "averaged ..." line over the zip header: a corrupt
    checkpoint, exit 0."""
    one = write(tmp_path / "step=1.ckpt", ckpt(torch.full((2,), 1.0), step=1))
    two = write(tmp_path / "step=2.ckpt", ckpt(torch.full((2,), 3.0), step=2))
    code = "import sys; from ablate.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with open(tmp_path / "avg.ckpt", "wb") as out:
        run = subprocess.run(
            [sys.executable, "-c", code, "average", str(one), str(two), "-o", "/dev/stdout"],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    assert run.returncode == 0 and "averaged 2 checkpoints -> /dev/stdout" in run.stderr
    torch.testing.assert_close(load_checkpoint(tmp_path / "avg.ckpt")["state_dict"]["model.w"], torch.full((2,), 2.0))


def test_average_of_a_run_that_kept_fewer_checkpoints_than_asked_warns_and_counts_right(tmp_path, capsys, caplog):
    """A run with train.keep_last 1 and `ablate average --last 5`: said so, not "averaged 1 checkpoints"."""
    (tmp_path / "checkpoints").mkdir()
    write(tmp_path / "checkpoints" / "step=300.ckpt", ckpt(torch.full((2,), 3.0), step=300))
    with caplog.at_level("WARNING", logger="ablate"):
        assert average_cli(average_args(run_dir=str(tmp_path), last=5, output=str(tmp_path / "avg.ckpt"))) == 0
    assert f"--last 5, but {tmp_path}/checkpoints holds 1 step checkpoint: the output holds its weights, nothing averaged" in caplog.text
    assert f"averaged 1 checkpoint -> {tmp_path / 'avg.ckpt'}" in capsys.readouterr().out
    write(tmp_path / "checkpoints" / "step=200.ckpt", ckpt(torch.full((2,), 1.0), step=200))
    caplog.clear()
    with caplog.at_level("WARNING", logger="ablate"):
        average_cli(average_args(run_dir=str(tmp_path), last=5, output=str(tmp_path / "avg2.ckpt")))
    assert "holds 2 step checkpoints: averaging those 2" in caplog.text
    assert "averaged 2 checkpoints" in capsys.readouterr().out
    caplog.clear()
    with caplog.at_level("WARNING", logger="ablate"):
        average_cli(average_args(run_dir=str(tmp_path), last=2, output=str(tmp_path / "avg3.ckpt")))
    assert caplog.text == ""  # as many as asked: nothing to say


def test_average_with_neither_checkpoints_nor_a_run_says_what_to_give():
    with pytest.raises(CheckpointError, match="nothing to average: name checkpoints, or a run with --run-dir") as e:
        average_cli(average_args(output="avg.ckpt"))
    assert "None" not in str(e.value)


def test_a_member_groups_checkpoint_given_where_a_runs_goes_is_named_as_the_groups():
    """`ablate evaluate GROUP/checkpoints/last.ckpt` said only 'field hyper_parameters.config is missing'."""
    configs = [{"model": {}, "out_dir": "sw/trials/0003-base"}, {"model": {}, "out_dir": "sw/trials/0004-base"}]
    group = {"hyper_parameters": {"configs": configs, "vocab_size": 64}}
    with pytest.raises(
        CheckpointError,
        match=r"g.ckpt is a member group's checkpoint \(2 members' weights stacked\).*its members: sw/trials/0003-base, sw/trials/0004-base\)",
    ):
        checkpoint_config(group, "g.ckpt")


def test_a_checkpoint_damaged_in_place_is_named_not_loaded_as_garbage(tmp_path):
    """Same size, bytes changed (a disk or a copy gone wrong): torch.load read NaN weights without a word; the zip's
    CRC-32 names the part. A bookkeeping read (mmap) reads no tensor and checks nothing."""
    path = write(tmp_path / "last.ckpt", ckpt(torch.randn(50_000)))
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4096] = b"\xff" * 4096
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: damaged: its part last/data/0 fails its checksum")):
        load_checkpoint(path)
    assert load_checkpoint(path, mmap=True)["global_step"] == 1


def test_a_bookkeeping_read_whose_pickle_was_damaged_names_the_checksum_not_the_unpickling(tmp_path):
    """mmap reads check nothing up front; when the damage is in data.pkl the load fails, and the error then says what
    check_intact says (`ablate evaluate` said 'UnicodeDecodeError: ...' of the flipped byte)."""
    path = write(tmp_path / "last.ckpt", ckpt(torch.randn(100)))
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("last/data.pkl")
    data = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)  # the local header's own lengths
    start = info.header_offset + 30 + name_len + extra_len  # the stored (uncompressed) bytes
    data[start] = 0x00  # the pickle's PROTO opcode
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: damaged: its part last/data.pkl fails its checksum")):
        load_checkpoint(path, mmap=True)
