"""A study's results table, in results.csv and printed: each score says what it is on (ablate.sweep.results_files,
ablate.sweep.results_terminal)."""

from __future__ import annotations

import csv
import io
import json

import optuna
import pytest
from live_study import NOW, add
from optuna.trial import TrialState
from rich.console import Console
from sweep_files import write
from sweep_summaries import SWEEP, on

from ablate.sweep.load import load_sweep
from ablate.sweep.results_files import summarize
from ablate.sweep.results_terminal import print_summary
from ablate.sweep.snapshot import snapshot


def trial_dir(root, name: str, summary: dict):
    out = root / "trials" / name
    out.mkdir(parents=True)
    (out / "summary.json").write_text(json.dumps(summary))
    return out


def test_the_sweep_table_says_what_its_scores_and_objective_are_on(tmp_path):
    """The reported case: the sweep's PPL 33.65 (the whole split) beside `ablate table`'s 31.44 (a 200-sentence
    sample) with nothing saying why. Now the lines under the table and results.csv name the sentences."""
    sweep = load_sweep(write(tmp_path, SWEEP + f"out_dir: {tmp_path}/sweep\n"))
    sweep.out_dir.mkdir()
    study = optuna.create_study(study_name="demo", direction="maximize")
    best = {"best": {"metric": "val/bleu", "value": 14.0}, "epochs": 0.97}
    summary = on(200) | best | {"last": {"val/bleu": 13.2, "val/ppl": 33.65}}
    add(study, TrialState.COMPLETE, "base", trial_dir(tmp_path, "0", summary), value=14.0, **summary["last"])
    summary = on(0) | best | {"last": {"val/bleu": 12.0, "val/ppl": 35.0}, "selected": "avg of last 2"}
    add(study, TrialState.COMPLETE, "A-h1", trial_dir(tmp_path, "1", summary), value=12.0, **summary["last"])
    add(study, TrialState.FAIL, "E-learned", fail_reason="boom")  # no run directory: no summary to read
    rows = summarize(sweep, study)
    with open(sweep.out_dir / "results.csv") as f:
        saved = {r["name"]: r for r in csv.DictReader(f)}
    assert saved["base"]["val/ppl_on"] == "valid split, all 1,014 sentences" and saved["base"]["epochs"] == "0.97"
    assert saved["base"]["val/bleu_on"] == "valid split, 200 of 1,014 sentences (random, seed 0)"
    assert saved["A-h1"]["objective_on"] == "val/bleu at the last validation" and saved["E-learned"]["val/bleu_on"] == ""
    console = Console(record=True, width=300, file=io.StringIO())
    print_summary(rows, console)
    text = console.export_text()
    assert "epochs" in text.splitlines()[2] and "0.97" in next(ln for ln in text.splitlines() if "base" in ln)
    assert (
        "BLEU: valid split, 200 of 1,014 sentences (random, seed 0) (trial 0); valid split, all 1,014 sentences (trial 1). "
        "PPL: valid split, all 1,014 sentences. Both from each trial's last validation" in text
    )
    assert "Objective: val/bleu at the best validation (trial 0); val/bleu at the last validation (trial 1)." in text


@pytest.mark.parametrize("how", ["preempted", "killed"])
def test_an_attempt_another_trial_continued_is_said_so_and_takes_nothing_from_the_later_ones_summary(tmp_path, how):
    """Trial 0 was interrupted and trial 2 continued it in the same run directory: results.csv listed trial 0 FAIL
    with no reason and trial 2's epochs and what its scores are on, while `ablate status` said "continued by trial 2".
    Killed by a signal (failed, with its reason), it was listed failed with trial 2's numbers, and counted failed."""
    sweep = load_sweep(write(tmp_path, SWEEP + f"out_dir: {tmp_path}/sweep\n"))
    sweep.out_dir.mkdir()
    study = optuna.create_study(study_name="demo", direction="maximize")
    shared = trial_dir(tmp_path, "0000-base", on(200) | {"epochs": 2.5, "last": {"val/bleu": 13.0, "val/ppl": 30.0}})
    stopped = {"preempted": True} if how == "preempted" else {"killed": True, "fail_reason": "killed by SIGKILL (exit code -9)"}
    own = {"val/bleu": 12.0, "val/ppl": 31.0}  # recorded from the summary it wrote before it was stopped (storage review)
    add(study, TrialState.FAIL, "base", shared, row=("base", None), **stopped, **own)
    add(study, TrialState.FAIL, "A-h1", tmp_path / "trials" / "0001-A-h1", row=("A-h1", None))  # nothing after it yet
    add(study, TrialState.COMPLETE, "base", shared, value=13.0, row=("base", None), continues=0, **{"val/bleu": 13.0})
    add(study, TrialState.FAIL, "", row=("base", None), fail_reason="[not run] duplicate: row base (seed None) is already complete")
    rows = {r["number"]: r for r in summarize(sweep, study)}
    # killed: its reason kept, beside what became of it (it was lost once continued)
    note = "continued by trial 2" if how == "preempted" else "killed by SIGKILL (exit code -9); continued by trial 2"
    assert (rows[0]["state"], rows[0]["fail_reason"], rows[0]["epochs"], rows[0]["val/bleu_on"], rows[0]["val/bleu"]) == (
        "CONTINUED",
        note,
        None,
        None,
        None,
    )
    assert sorted(rows) == [0, 1, 2]  # the duplicate ran nothing: no nameless FAIL row
    assert (rows[1]["state"], rows[1]["fail_reason"]) == ("INTERRUPTED", "interrupted, continues on the next run")
    assert rows[2]["state"] == "COMPLETE" and rows[2]["epochs"] == 2.5 and rows[2]["val/bleu_on"].startswith("valid split, 200 of")
    console = Console(record=True, width=300, file=io.StringIO())
    print_summary(list(rows.values()), console)
    assert "CONTINUED" in console.export_text() and "failed" not in console.export_text()
    snap = snapshot(study, now=NOW)
    assert (snap.trials[0].state, snap.trials[0].note, snap.counts["failed"]) == ("continued", note, 0)
