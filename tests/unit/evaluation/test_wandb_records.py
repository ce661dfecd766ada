"""An evaluation record through a real offline W&B run (ablate.evaluation.wandb_records): its sentences logged as a W&B table,
read back whole from the run's files by `ablate table --wandb`, and refused, naming the run, when the table file
is missing, changed or not the record's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ablate.cli import main
from ablate.evaluation.records import EvalFileError, eval_record, parse_eval
from ablate.evaluation.wandb_records import log_record, read_records, table_key
from ablate.files.wandb_offline import find_runs, read_run
from ablate.table.finished_runs import runs_from_wandb, unpruned
from ablate.table.sentence_records import collect

pytestmark = pytest.mark.slow  # W&B offline runs written and read back: seconds; the default set stays under a minute

REFS = ["ein Hund läuft im Park .", "zwei Männer spielen Fußball .", "eine Frau liest ein Buch .", "Kinder essen Eis ."]


def _record(hyps: list[str], nll: list[float]) -> dict:
    return eval_record(split="valid", dataset="multi30k", checkpoint="avg.ckpt", indices=[0, 2, 5, 9],
                       hypotheses=hyps, references=REFS, nll=nll, tokens=[7, 6, 7, 5])  # fmt: skip


BASE = _record(["ein Hund rennt im Park .", "zwei Männer spielen Fußball .", "eine Frau liest .", "Kinder essen ."],
               [9.5, 4.25, 11.0, 6.5])  # fmt: skip
ROW = _record(list(REFS), [3.0, 2.5, 4.0, 2.0])


def _offline_run(root, name, record):
    import wandb

    run = wandb.init(project="t", dir=str(root), mode="offline", name=name, config={"sweep": {"row": name}})
    run.summary.update({"last": {"val/bleu": record["bleu"], "val/ppl": record["ppl"]}})
    log_record(run, record)
    run.finish()
    return find_runs(root)[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import wandb

    root = tmp_path_factory.mktemp("wandb")
    made = {name: _offline_run(root / name, name, rec) for name, rec in (("base", BASE), ("A-h1", ROW))}
    # `run.finish()` returns before W&B's service has written the runs' records to their files (it holds them in
    # memory until it closes a file): read under load, a run could still be a bare header. teardown waits for the
    # service to close every file and exit.
    wandb.teardown()
    return made | {"root": root}


def test_the_record_comes_back_whole_from_the_run_files(runs):
    run = read_run(runs["base"])
    assert "hypotheses" not in run.summary["eval/valid"]  # the sentences travel in the table, not the summary
    assert run.summary[table_key("valid")]["nrows"] == 4
    whole = read_records(run.summary, run.files, str(run.path))["eval/valid"]
    assert whole == BASE
    assert parse_eval(whole, "w").hypotheses == BASE["hypotheses"]


def test_ablate_table_pairs_wandb_runs_on_their_sentences(runs):
    loaded, skipped = runs_from_wandb(runs["root"])
    found = {r.row: r for r in loaded}
    assert set(found) == {"base", "A-h1"} and skipped == {}
    ev = collect(list(found.values()), "valid")
    assert ev.runs_with_records == 2 and ev.sentences == 4
    assert found["A-h1"].bleu == pytest.approx(100.0) and found["base"].bleu == pytest.approx(BASE["bleu"])


def _copy(runs, tmp_path):
    dst = tmp_path / "base"
    shutil.copytree(runs["base"], dst)
    run = read_run(dst)
    return run, run.files / run.summary[table_key("valid")]["path"]


def test_a_missing_table_file_is_named(runs, tmp_path):
    run, table = _copy(runs, tmp_path)
    table.unlink()
    with pytest.raises(EvalFileError, match=rf"summary key eval/valid_sentences\): its table file .*{table.name} is missing"):
        read_records(run.summary, run.files, str(run.path))


def test_a_changed_table_file_is_refused(runs, tmp_path):
    run, table = _copy(runs, tmp_path)
    table.write_text(table.read_text().replace("Hund", "Katze"))
    with pytest.raises(EvalFileError, match="does not match the sha256 the run recorded"):
        read_records(run.summary, run.files, str(run.path))


def test_a_table_of_other_columns_is_refused(runs, tmp_path):
    run, table = _copy(runs, tmp_path)
    table.write_text(json.dumps({"columns": ["index", "text"], "data": [[0, "x"]]}))
    ref = dict(run.summary[table_key("valid")], sha256=None)
    with pytest.raises(EvalFileError, match=r"has columns \['index', 'text'\], expected"):
        read_records({**run.summary, table_key("valid"): ref}, run.files, str(run.path))


def test_the_runs_are_read_only_once_wandb_has_closed_their_files(runs):
    """W&B keeps an offline run's records in memory until its service closes the run's file, which `run.finish()`
    does not wait for: the fixture reads the files only after they were closed, so each ends with its exit record."""
    assert all(read_run(runs[name]).exit_code == 0 for name in ("base", "A-h1"))


def _unfinished(runs, root):
    """A copy of the base run as its file reads while W&B still holds its records: the header only."""
    dst = root / "running"
    shutil.copytree(runs["base"], dst)
    wandb_file = next(dst.glob("run-*.wandb"))
    wandb_file.write_bytes(wandb_file.read_bytes()[:7])
    return wandb_file


def test_a_run_whose_file_is_not_closed_is_skipped_and_named(runs, tmp_path):
    shutil.copytree(runs["A-h1"], tmp_path / "A-h1")
    wandb_file = _unfinished(runs, tmp_path)
    found, skipped = runs_from_wandb(tmp_path)
    assert [r.row for r in found] == ["A-h1"]
    assert skipped == {str(wandb_file): "not finished: no exit record (still running, or W&B stopped before closing its file)"}
    assert read_run(wandb_file).exit_code is None


def test_ablate_table_wandb_says_which_runs_it_left_out_and_why(runs, tmp_path, capsys):
    root = tmp_path / "study"
    for name in ("base", "A-h1"):
        shutil.copytree(runs[name], root / name)
    wandb_file = _unfinished(runs, root)
    assert main(["table", str(root), "--wandb", "--out", str(tmp_path / "out"), "--boot", "50"]) == 0
    reason = "not finished: no exit record (still running, or W&B stopped before closing its file)"
    report = json.loads((tmp_path / "out" / "table3.json").read_text())
    assert report["skipped_runs"] == [{"run": str(wandb_file), "reason": reason}] and report["runs"] == 2
    note = f"Left out 1 W&B run: {wandb_file} ({reason})."
    # the terminal wraps notes at its width, a long path too (under xdist the paths are longer): compare without spaces
    shown = "".join(capsys.readouterr().out.split())
    assert "".join(note.split()) in shown and note in (tmp_path / "out" / "table3.md").read_text()


def test_finished_runs_without_scores_and_sweep_summary_runs_are_named_too(tmp_path, capsys):
    """A sweep's summary run is told by its job type: a trial a user tagged "summary" is still a trial."""
    import wandb

    for name, job_type in (("failed", None), ("t-summary", "sweep-summary"), ("pruned", None)):
        run = wandb.init(project="t", dir=str(tmp_path / name), mode="offline", name=name, job_type=job_type)
        if name == "pruned":  # a run a sweep's pruner stopped: final scores, but no finished seed
            run.summary.update({"last": {"val/bleu": 1.0, "val/ppl": 900.0}, "steps": 10, "stop_reason": "pruned"})
        run.finish()
    wandb.teardown()
    found, skipped = runs_from_wandb(tmp_path)
    by_dir = {Path(path).relative_to(tmp_path).parts[0]: why for path, why in skipped.items()}
    assert by_dir == {
        "failed": "finished without final scores (no val/bleu or last in its summary): failed or stopped before them",
        "t-summary": "a sweep's summary table, not a trial",
    }
    assert [r.stop_reason for r in found] == ["pruned"] and unpruned(found)[0] == []  # the table leaves it out
    shutil.rmtree(tmp_path / "pruned")
    assert main(["table", str(tmp_path), "--wandb"]) == 2
    err = capsys.readouterr().err
    assert (
        f"found no W&B offline runs with a summary under {tmp_path}; left out: " in err and "(a sweep's summary table, not a trial)" in err
    )


def test_a_summary_without_a_table_is_unchanged(tmp_path):
    summary = {"eval/valid": BASE, "last": {}}
    assert read_records(summary, tmp_path / "no-files", "w") == summary


def test_a_trial_tagged_summary_is_read_and_of_a_run_resumed_under_its_id_only_the_latest(tmp_path):
    import wandb

    for bleu in (10.0, 12.5):  # the same W&B run id twice: an offline-run directory each
        run = wandb.init(project="t", dir=str(tmp_path), mode="offline", name="base", id="trial-7", resume="allow",
                         tags=["summary"], job_type="sweep-trial", config={"sweep": {"row": "base"}})  # fmt: skip
        run.summary.update({"last": {"val/bleu": bleu, "val/ppl": 9.0}})
        run.finish()
    wandb.teardown()
    found, skipped = runs_from_wandb(tmp_path)
    assert [(r.row, r.bleu) for r in found] == [("base", 12.5)]
    ((earlier, why),) = skipped.items()
    assert earlier != found[0].source and why == f"an earlier copy of W&B run trial-7; its latest, {found[0].source}, is read"
