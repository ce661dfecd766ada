"""A finished row whose sweep file now gives it another config is named when the sweep runs again, with what changed:
a rerun trains only the rows with no finished trial, so the edit had kept the old result in silence."""

from __future__ import annotations

import logging

from optuna.trial import TrialState
from sweep_files import write

from ablate.config import to_yaml
from ablate.sweep.changed_rows import changed_rows
from ablate.sweep.ledger import row_of
from ablate.sweep.load import load_sweep
from ablate.sweep.variants_plan import Variants
from ablate.sweep.worker import open_sweep_study

ROWS = "name: v\nbase: base.yaml\nseeds: [1, 2]\nvariants:\n  base: {}\n  drop: {model.dropout: 0.2}\n"


def _finished(tmp_path, text: str):
    """The study of `text` with every trial finished, each with the run folder and config.yaml its worker writes."""
    sweep = load_sweep(write(tmp_path, text + f"out_dir: {tmp_path}/out\n"))
    handle, plan = open_sweep_study(sweep, f"sqlite:///{tmp_path}/study.db"), Variants(sweep)
    plan.queue(handle.study)
    while (trial := plan.take(handle)) is not None:
        row, seed = row_of(handle.frozen(trial))
        folder = tmp_path / "out" / "trials" / f"{trial.number:04d}-{row}-s{seed}"
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(to_yaml(sweep.config_for(sweep.variants[row], seed, folder)))
        trial.set_user_attr("out_dir", str(folder))
        handle.study.tell(trial, 1.0)
    return handle


def test_a_finished_row_edited_since_is_named_with_what_changed_and_not_trained_again(tmp_path, caplog):
    handle = _finished(tmp_path, ROWS)
    edited = load_sweep(
        write(tmp_path, ROWS.replace("{model.dropout: 0.2}", "{model.dropout: 0.3, train.lr_scale: 0.5}") + f"out_dir: {tmp_path}/out\n")
    )
    trials = handle.study.get_trials()
    said = changed_rows(edited, trials)
    assert said == [
        f"row 'drop' finished (trial 2) on another config than {edited.path} gives it now (model.dropout: 0.2 -> 0.3, "
        "train.lr_scale: 1.0 -> 0.5): its result stands and it is not trained again; to train the new config, give the "
        "row a new name or the sweep another out_dir"
    ]
    with caplog.at_level(logging.WARNING, logger="ablate"):
        assert Variants(edited).queue(handle.study) == 0  # as before: a finished row is not trained again
    assert [r.getMessage() for r in caplog.records] == said
    assert len(handle.study.get_trials(states=(TrialState.COMPLETE,))) == 4


def test_an_unchanged_study_and_a_row_whose_folder_is_gone_say_nothing(tmp_path):
    handle = _finished(tmp_path, ROWS)
    same = load_sweep(write(tmp_path, ROWS + f"out_dir: {tmp_path}/out\n"))
    assert changed_rows(same, handle.study.get_trials()) == []
    for folder in (tmp_path / "out" / "trials").iterdir():
        (folder / "config.yaml").unlink()
    edited = load_sweep(write(tmp_path, ROWS.replace("0.2", "0.3") + f"out_dir: {tmp_path}/out\n"))
    assert changed_rows(edited, handle.study.get_trials()) == []  # `ablate table` names a run folder it cannot read
