"""`ablate table --split test` scores a run without a record from the checkpoint it reported (ablate.table.checkpoint_scoring):
the last-K average or the final weights, never the best by validation standing in for either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from table_study import bare_run, record_fields, write_run

from ablate.cli import main
from ablate.evaluation.records import write_eval_file
from ablate.table import checkpoint_scoring
from ablate.training.checkpoint import CheckpointError


def test_split_test_evaluates_a_run_without_a_record_from_its_selected_checkpoint(tmp_path, monkeypatch):
    f = record_fields(25)
    write_run(tmp_path, "base", 1, records={"test": f})
    run = write_run(tmp_path, "C-N2", 1, {"model.enc_layers": 2, "model.dec_layers": 2})
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "best.ckpt").write_bytes(b"")
    (run / "checkpoints" / "avg.ckpt").write_bytes(b"")
    calls = []

    def fake_evaluate_run(run_dir: Path, split: str, device: str = "auto") -> Path:
        calls.append((run_dir, split, checkpoint_scoring.selected_checkpoint(run_dir).name))
        return write_eval_file(run_dir, split, dataset="multi30k", checkpoint="avg.ckpt", indices=range(25), **f)

    monkeypatch.setattr(checkpoint_scoring, "evaluate_run", fake_evaluate_run)
    monkeypatch.chdir(tmp_path)
    assert main(["table", str(tmp_path), "--split", "test", "--boot", "100"]) == 0
    assert calls == [(run, "test", "avg.ckpt")] and (run / "eval" / "test.json").exists()
    report = json.loads((tmp_path / "tables" / tmp_path.name / "table3.json").read_text())  # the default --out
    assert report["checkpoints"] == ["avg.ckpt", "best.ckpt"] and report["rows"][1]["bleu"]["delta"] == 0.0


def test_the_checkpoint_scored_on_test_holds_the_weights_the_run_reported(tmp_path):
    """avg.ckpt for a run that reported its last-K average; last.ckpt for one that reported its final weights, and only
    when it was saved at the run's last step (a rule may stop between saves); best.ckpt never stands in for either."""

    def run(name: str, selected: str, steps: int, files: dict[str, int]) -> Path:
        d = write_run(tmp_path, name, 1, summary={"last": {"val/bleu": 20.0}, "selected": selected, "steps": steps})
        (d / "checkpoints").mkdir()
        for f, step in files.items():
            torch.save({"global_step": step, "state_dict": {}, "hyper_parameters": {}}, d / "checkpoints" / f)
        return d

    avg = run("avg", "avg of last 5", 900, {"avg.ckpt": 900, "best.ckpt": 500, "last.ckpt": 900})
    assert checkpoint_scoring.selected_checkpoint(avg).name == "avg.ckpt"
    no_avg = run("noavg", "avg of last 5", 900, {"best.ckpt": 500, "last.ckpt": 900})
    assert checkpoint_scoring.selected_checkpoint(no_avg) is None and "avg.ckpt" in checkpoint_scoring.wanted_checkpoint(no_avg)
    final = run("final", "final weights", 900, {"best.ckpt": 500, "last.ckpt": 900})
    assert checkpoint_scoring.selected_checkpoint(final).name == "last.ckpt"
    stale = run("stale", "final weights", 930, {"best.ckpt": 500, "last.ckpt": 900})  # stopped 30 steps after the save
    assert checkpoint_scoring.selected_checkpoint(stale) is None and "last step" in checkpoint_scoring.wanted_checkpoint(stale)
    with pytest.raises(ValueError, match=r"run 'stale' .* no checkpoints/last.ckpt saved at the run's last step"):
        checkpoint_scoring.evaluator("test")(bare_run("stale", str(stale), run_dir=stale))
    older = run("older", "", 900, {"best.ckpt": 500})  # recorded no selection: the best, as before
    assert checkpoint_scoring.selected_checkpoint(older).name == "best.ckpt"


def test_an_unreadable_last_ckpt_is_said_to_be_unreadable_naming_it_not_saved_at_another_step(tmp_path, capsys):
    """A last.ckpt that torch could not read was taken for one saved at another step: `--split test` said the run had
    "no checkpoints/last.ckpt saved at the run's last step" of a file that is there, cut short by a copy."""
    study = tmp_path / "study"
    write_run(study, "base", 1, records={"test": record_fields(25)})
    run = write_run(
        study, "C-N2", 1, {"model.enc_layers": 2}, summary={"last": {"val/bleu": 20.0}, "selected": "final weights", "steps": 900}
    )
    (run / "checkpoints").mkdir()
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(b"PK\x03\x04 and no more")
    with pytest.raises(CheckpointError, match=f"^{last}: not a readable checkpoint \\(cut short"):
        checkpoint_scoring.selected_checkpoint(run)
    assert main(["table", str(study), "--split", "test", "--out", str(tmp_path / "out")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"a run cannot be scored on the test split, so none was: run 'C-N2' at {run}: {last}: not a readable checkpoint" in err
    assert "last step" not in err


@pytest.mark.parametrize("command", ["table", "archive"])
def test_every_run_to_score_is_checked_before_the_first_is_scored(tmp_path, monkeypatch, capsys, command):
    """A study whose last run needs a plugin not passed, or lacks its checkpoint, is refused before minutes of scoring
    the others, naming the plugin to pass (`--plugins`, which `archive` takes as `table` does)."""
    study = tmp_path / "study"
    runs = [write_run(study, row, 1) for row in ("base", "E-mine", "E-gone")]
    for run in runs:
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "best.ckpt").write_bytes(b"")
    config = runs[1] / "config.yaml"
    text = config.read_text().replace("attention: scaled_dot_product", "attention: mine_unregistered")
    config.write_text(text.replace("plugins: []", f"plugins:\n- {tmp_path / 'mine.py'}"))
    (runs[2] / "checkpoints" / "best.ckpt").unlink()
    monkeypatch.setattr(checkpoint_scoring, "evaluate_run", lambda *a, **k: pytest.fail("scored before every run was checked"))
    args = [str(study), str(tmp_path / "out"), "--split", "test"] if command == "archive" else [str(study), "--split", "test"]
    assert main([command, *args]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "2 runs cannot be scored on the test split, so none was" in err
    assert f"needs plugin {tmp_path / 'mine.py'} (model.attention='mine_unregistered' is not registered); pass --plugins" in err
    assert f"{runs[2]}: no eval/test.json and no checkpoints/avg.ckpt or best.ckpt to make one from" in err
    assert not (tmp_path / "out").exists() and not any(study.rglob("test.json"))
    (tmp_path / "mine.py").write_text("x = 1\n")  # registers nothing: passed, it is imported, and the run still cannot be
    assert main([command, *args, "--plugins", str(tmp_path / "mine.py")]) == 2
    assert "model.attention='mine_unregistered' is not registered by its plugins" in " ".join(capsys.readouterr().err.split())
