"""A full disk while ablate writes: the old file stays whole, no temporary is left, and the error says "disk full"
and names the file. Appended files (metrics.csv) always end on a complete line."""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import optuna
import pytest
import torch
from full_disk import FullDisk, leftovers
from optuna.trial import TrialState, create_trial


def full_disk_error(path, err: pytest.ExceptionInfo) -> None:
    """The error a full disk gives: says so, names the file, and never with a traceback's worth of driver text."""
    message = str(err.value)
    assert message.startswith("disk full: ") and str(path) in message, message


def study_with(n: int) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    for i in range(n):
        attrs = {"name": f"row-{i}", "val/bleu": 20.0 + i, "params": 1000 + i, "out_dir": f"/runs/row-{i}-{'x' * 200}"}
        study.add_trial(create_trial(value=20.0 + i, state=TrialState.COMPLETE, user_attrs=attrs))
    return study


def test_results_json_keeps_its_rows_when_the_disk_fills_while_a_sweep_adds_one(tmp_path, monkeypatch):
    from ablate.sweep.results_files import summarize

    sweep = SimpleNamespace(out_dir=tmp_path)
    old = summarize(sweep, study_with(20))
    old_json, old_csv = (tmp_path / "results.json").read_text(), (tmp_path / "results.csv").read_text()
    assert len(old_json) > 4096
    new_csv_bytes = len(old_csv.encode()) + 400  # room for the new results.csv, then the disk is full mid-results.json
    FullDisk(tmp_path, room=new_csv_bytes).install(monkeypatch)
    with pytest.raises(OSError) as err:
        summarize(sweep, study_with(21))
    full_disk_error(tmp_path / "results.json", err)
    assert json.loads((tmp_path / "results.json").read_text()) == json.loads(old_json) == json.loads(json.dumps(old))
    assert leftovers(tmp_path, "results.json", "results.csv") == []


def test_any_file_written_through_replacing_is_left_whole_and_named(tmp_path, monkeypatch):
    from ablate.files.atomic import replacing

    target = tmp_path / "test.json"
    target.write_text('{"bleu": 27.3}')
    FullDisk(tmp_path, room=100).install(monkeypatch)
    with pytest.raises(OSError) as err, replacing(target) as tmp, open(tmp, "w") as f:
        json.dump({"hypotheses": ["ein Satz"] * 1000}, f)
    full_disk_error(target, err)
    assert target.read_text() == '{"bleu": 27.3}' and leftovers(tmp_path, "test.json") == []


def test_an_averaged_checkpoint_on_a_full_disk_leaves_the_old_one(tmp_path, monkeypatch):
    from ablate.training.checkpoint import save_atomic

    path = tmp_path / "averaged.ckpt"
    save_atomic({"state_dict": {"w": torch.ones(3)}, "hyper_parameters": {}}, path)
    FullDisk(tmp_path, room=1000).install(monkeypatch)
    with pytest.raises(OSError) as err:
        save_atomic({"state_dict": {"w": torch.zeros(10_000)}, "hyper_parameters": {}}, path)
    full_disk_error(path, err)
    monkeypatch.undo()
    assert torch.equal(torch.load(path, weights_only=True)["state_dict"]["w"], torch.ones(3))
    assert leftovers(tmp_path, "averaged.ckpt") == []


def test_progress_json_leaves_no_temporary_on_a_full_disk(tmp_path, monkeypatch):
    from ablate.run.progress_file import read_progress, write_progress

    write_progress(tmp_path, {"phase": "training", "step": 10})
    FullDisk(tmp_path, room=5).install(monkeypatch)
    with pytest.raises(OSError) as err:
        write_progress(tmp_path, {"phase": "training", "step": 20})
    full_disk_error(tmp_path / "progress.json", err)
    assert read_progress(tmp_path) == {"phase": "training", "step": 10} and leftovers(tmp_path, "progress.json") == []


def metrics_logger(out):
    from ablate.run.loggers import make_csv_logger

    return make_csv_logger(out, attempt=0)


@pytest.mark.parametrize("new_column", [False, True], ids=["append", "new-column"])
def test_metrics_csv_ends_on_a_complete_line_and_keeps_its_rows_on_a_full_disk(tmp_path, monkeypatch, new_column):
    logger = metrics_logger(tmp_path)
    for step in range(3):
        logger.log_metrics({"train/loss": 5.0 - step}, step=step)
    logger.save()
    path = tmp_path / "metrics.csv"
    before = path.read_text()
    disk = FullDisk(tmp_path, room=10).install(monkeypatch)
    logger.log_metrics({"train/loss": 1.23456789, **({"val/bleu": 3.0} if new_column else {})}, step=3)
    with pytest.raises(OSError) as err:
        logger.save()
    full_disk_error(path, err)
    assert path.read_text() == before and before.endswith("\n")  # the earlier rows, nothing half-written after them
    assert leftovers(tmp_path, "metrics.csv") == []
    disk.room = 10**6  # space freed: the rows held back are written, under one header
    logger.log_metrics({"train/loss": 0.5}, step=4)
    logger.save()
    rows = list(csv.DictReader(path.open()))
    assert [r["step"] for r in rows] == ["0", "1", "2", "3", "4"] and rows[3]["train/loss"] == "1.23456789"
    assert all(None not in r for r in rows)  # no row wider than the header


def test_hparams_yaml_keeps_its_contents_on_a_full_disk(tmp_path, monkeypatch):
    logger = metrics_logger(tmp_path)
    logger.log_hyperparams({"model": {"d_model": 512}})
    path = tmp_path / "hparams.yaml"
    before = path.read_text()
    FullDisk(tmp_path, room=3).install(monkeypatch)
    with pytest.raises(OSError) as err:
        logger.log_hyperparams({"data": {"vocab_size": 37000}})
    full_disk_error(path, err)
    assert path.read_text() == before and leftovers(tmp_path, "hparams.yaml") == []


def test_an_appended_file_is_cut_back_to_its_last_complete_line(tmp_path, monkeypatch):
    from ablate.files.atomic import append

    path = tmp_path / "log.csv"
    path.write_text("step,loss\n0,5.0\n")
    FullDisk(tmp_path, room=4).install(monkeypatch)
    with pytest.raises(OSError) as err:
        append(path, "1,4.0\n2,3.0\n")
    full_disk_error(path, err)
    assert path.read_text() == "step,loss\n0,5.0\n"


def test_translate_output_on_a_full_disk_is_an_error_naming_it_and_keeps_the_old_file(tmp_path, monkeypatch, capfd):
    from checkpoints import tiny_checkpoint

    from ablate.cli import main

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    torch.save(tiny_checkpoint(tmp_path), tmp_path / "m.ckpt")
    (tmp_path / "in.txt").write_text("the dog runs\nthe cat sleeps\n")
    out = tmp_path / "outputs" / "out.txt"
    out.parent.mkdir()
    out.write_text("yesterday's translations\n")
    capfd.readouterr()  # what making the checkpoint logged (a tokenizer trained), once an earlier test routed logs to stderr
    FullDisk(out.parent, room=1).install(monkeypatch)  # less than any output: even two empty translations are 2 bytes
    rc = main(
        ["translate", str(tmp_path / "m.ckpt"), "--input", str(tmp_path / "in.txt"), "--output", str(out), "--device", "cpu", "--force"]
    )
    err = capfd.readouterr().err
    assert rc == 2 and err.startswith(f"ablate translate: error: disk full: could not write {out} "), err
    assert out.read_text() == "yesterday's translations\n" and leftovers(out.parent, "out.txt") == []
