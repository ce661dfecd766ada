"""A study's results table: each score says what it is on, and the study's one W&B summary run (offline files)."""

from __future__ import annotations

import csv
import io
import json
from types import SimpleNamespace

import optuna
import pytest
from live_study import add
from optuna.trial import TrialState
from rich.console import Console
from sweep_files import write

from ablate.evaluation.records import describe_subset, write_eval_file
from ablate.experiment import load_config
from ablate.files.wandb_offline import find_runs, latest_of_each, read_run
from ablate.run.evaluation import scored_on as recorded_on
from ablate.sweep.load import load_sweep
from ablate.sweep.results import COLUMNS, log_wandb_table, objective_on, print_summary, scored_on, summarize, summary_run_id
from ablate.sweep.trial import metric_value
from ablate.table.finished_runs import runs_from_wandb

SWEEP = "name: demo\nbase: base.yaml\nobjective: {metric: val/bleu, direction: maximize}\nvariants: {base: {}, A-h1: {model.heads: 1}}\n"
VALID = 1014  # sentences in the crafted validation split


def on(val_max_sentences: int, val_bleu: bool = True) -> dict:
    """summary.json's record of what its validation scores are on, as a run writes it (ablate.run.evaluation)."""
    cfg = load_config(train={"val_max_sentences": val_max_sentences, "val_bleu": val_bleu})
    return recorded_on(cfg, SimpleNamespace(raw=lambda split: ([], ["ref"] * VALID)))


def test_a_summary_says_what_each_score_is_on(tmp_path):
    assert scored_on(on(200)) == {
        "val/loss": "valid split, all 1,014 sentences",
        "val/ppl": "valid split, all 1,014 sentences",  # the one number the sweep's table and `ablate table` differ in
        "val/bleu": "valid split, 200 of 1,014 sentences (random, seed 0)",
    }
    assert scored_on(on(0))["val/bleu"] == "valid split, all 1,014 sentences"
    # train.val_bleu off: val/bleu is the evaluation record's, whose subset the record names (a W&B run: its summary).
    summary = on(2, val_bleu=False) | {"eval_record": "eval/valid.json"}
    fields = dict(indices=[3, 9], hypotheses=["a b", "c"], references=["a b", "c d"], nll=[1.0, 2.0], tokens=[3, 2])
    write_eval_file(tmp_path, "valid", dataset="multi30k", checkpoint="final", subset=describe_subset(2, VALID, 0), **fields)
    assert scored_on(summary, tmp_path)["val/bleu"] == "valid split, 2 of 1,014 sentences (random, seed 0)"
    record = json.loads((tmp_path / "eval" / "valid.json").read_text())
    assert scored_on(on(2, val_bleu=False) | {"eval/valid": record})["val/bleu"] == "valid split, 2 of 1,014 sentences (random, seed 0)"
    assert scored_on({"last": {"val/bleu": 20.0}}) == {"val/loss": None, "val/ppl": None, "val/bleu": None}  # an older run


@pytest.mark.parametrize(
    "summary, said",
    [
        ({"best": {"metric": "val/bleu", "value": 14.0}, "last": {"val/bleu": 13.2}}, "val/bleu at the best validation"),
        ({"best": {"metric": "val/bleu", "value": 14.0}, "last": {"val/bleu": 13.2}, "selected": "avg of last 2"}, "at the last"),
        ({"best": {"metric": "val/loss", "value": 2.0}, "last": {"val/bleu": 13.2}}, "val/bleu at the last validation"),
        ({"best": {"metric": "val/bleu", "value": None}, "last": {}, "val/bleu": 12.0}, "val/bleu of the whole run"),
    ],
)
def test_the_objective_says_which_validation_it_read_as_the_trial_read_it(summary, said):
    where = objective_on(summary, {"val/bleu": 1.0})
    assert said in where
    read = {"best": summary["best"]["value"], "last": summary["last"].get("val/bleu"), "whole": summary.get("val/bleu")}
    assert read[where.split(" ")[3]] == metric_value(summary, "val/bleu")  # the number it names is the objective's
    assert objective_on(summary, {"val/bleu": 1.0, "speed/tokens_per_s": 0.001}).endswith(" + 0.001 × speed/tokens_per_s of the whole run")


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


@pytest.mark.slow  # W&B offline runs started and read back: seconds; the default set stays under a minute
def test_the_study_has_one_summary_run_updated_by_each_sweep_run_and_it_is_no_trial(tmp_path):
    """Run twice (a finished sweep run again), the summary run keeps its id: W&B, syncing, updates the one run. Its
    offline files are a directory per update; the latest holds the latest table. `ablate table --wandb` tells it by
    its job type, and its tags are the experiment's and "summary", each once."""
    import wandb

    sweep = load_sweep(write(tmp_path, SWEEP + f"out_dir: {tmp_path}/sweep\n"))
    (tmp_path / "base.yaml").write_text("model: {d_model: 64, heads: 4, d_ff: 128}\nlogging: {tags: [paper, summary, paper]}\n")
    sweep.out_dir.mkdir()
    for rows in ([{"name": "base"}], [{"name": "base"}, {"name": "A-h1"}]):
        log_wandb_table(sweep, [dict.fromkeys(COLUMNS) | r for r in rows])
    wandb.teardown()  # finish() returns before the service writes the run files
    runs = [read_run(p) for p in find_runs(sweep.out_dir)]
    url = f"sqlite:///{(sweep.out_dir / 'study.db').resolve()}"
    assert len(runs) == 2 and {r.run_id for r in runs} == {summary_run_id(sweep, url)}
    assert all(r.job_type == "sweep-summary" and r.tags == ["paper", "summary"] and r.exit_code == 0 for r in runs)
    (latest,), earlier = latest_of_each(runs)
    assert len(earlier) == 1 and latest.started > read_run(next(iter(earlier))).started
    logged = next(h for h in latest.history if h.get("trials/_type") == "table-file")
    assert logged["trials/nrows"] == 2  # the second sweep run's table
    found, skipped = runs_from_wandb(sweep.out_dir)
    assert found == [] and sorted(skipped.values()) == ["a sweep's summary table, not a trial"] * 2


def test_the_summary_run_id_is_the_study_in_its_storage():
    sweep = SimpleNamespace(name="table3 small/v2")
    same = summary_run_id(sweep, "postgresql://me:secret@db/studies")
    assert same == summary_run_id(sweep, "postgresql://me:changed@db/studies")  # a new password: the same study
    assert same.startswith("table3_small_v2-summary-") and len(same) <= 64
    assert same != summary_run_id(sweep, "postgresql://me@other/studies")
    assert same != summary_run_id(SimpleNamespace(name="table3"), "postgresql://me@db/studies")
