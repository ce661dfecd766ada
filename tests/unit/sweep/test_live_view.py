"""The live view's picture of a sweep, from a crafted study and crafted progress files: rich and plain renderings."""

from __future__ import annotations

import io
import re

import optuna
import pytest
from helpers import multi30k_names
from live_study import NOW, add, crafted, progress
from optuna.trial import TrialState
from rich.console import Console
from sweep_files import VARIANTS, write

from ablate.cli import main
from ablate.sweep.live import PlainPrinter
from ablate.sweep.picture import plain_lines, render
from ablate.sweep.snapshot import snapshot


def test_the_picture_has_every_running_trial_with_its_progress_the_counts_and_the_best_row(tmp_path):
    snap = snapshot(crafted(tmp_path), now=NOW)
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(render(snap))
    text = console.export_text()
    line = next(x for x in text.splitlines() if "E-learned" in x)
    assert re.search(r"E-learned\s+training\s+120/300\s+0\.40\s+2,031\s+1m32s\s+3\.412\s+12\.80", line), text
    line = next(x for x in text.splitlines() if "attn-additive" in x)
    assert re.search(r"attn-additive\s+validating\s+150/300\s+0\.40\s+1,500\s+1h01m\s+-\s+-", line), text
    assert "A-h1" not in text and "A-h16" not in text  # finished trials are counted, not listed, while a sweep runs
    assert "running 2, finished 1, pruned 1, failed 1, waiting 1" in text  # the bookkeeping trial counts for nothing
    assert "best: base (trial 0) objective 25.61, val/bleu 25.61, val/loss 2.100" in text


def test_all_trials_lists_finished_ones_with_their_results_and_failures_with_their_reason(tmp_path):
    text = "\n".join(plain_lines(snapshot(crafted(tmp_path), now=NOW), all_trials=True))
    assert "trial 0 base: finished, step 300/300, epochs 1.00, 2,500 tok/s, ETA -, val/loss 2.100, val/bleu 25.61, objective 25.61" in text
    assert "trial 3 A-h1: pruned" in text and "val/loss 5.000" in text
    assert "trial 4 A-h16: failed" in text and "(FloatingPointError: train/loss is nan)" in text
    assert "trial 5" not in text  # bookkeeping


def test_plain_output_has_the_same_fields_and_no_escape_codes(tmp_path):
    snap = snapshot(crafted(tmp_path), now=NOW)
    out = io.StringIO()
    PlainPrinter(out, every_s=60).update(snap)
    text = out.getvalue()
    assert "\x1b" not in text
    lines = text.splitlines()
    assert re.fullmatch(
        r"\[\d\d:\d\d:\d\d\] trial 1 E-learned: training, step 120/300, epochs 0.40, 2,031 tok/s, ETA 1m32s, "
        r"val/loss 3\.412, val/bleu 12\.80",
        lines[0],
    ), lines
    assert lines[1].endswith("trial 2 attn-additive: validating, step 150/300, epochs 0.40, 1,500 tok/s, ETA 1h01m, val/loss -, val/bleu -")
    assert lines[2].endswith(
        "quickstart: running 2, finished 1, pruned 1, failed 1, waiting 1; about 1h01m left at 2 at a time; "
        "best: base (trial 0) objective 25.61, val/bleu 25.61, val/loss 2.100"
    )


def test_plain_printer_prints_a_trial_at_each_validation_and_otherwise_only_every_n_seconds(tmp_path):
    study = crafted(tmp_path)
    out = io.StringIO()
    printer = PlainPrinter(out, every_s=60)
    printer.update(snapshot(study, now=NOW))
    out.truncate(0), out.seek(0)
    progress(tmp_path / "1", step=130)  # a few steps later, nothing new: quiet
    printer.update(snapshot(study, now=NOW + 5))
    assert out.getvalue() == ""
    progress(tmp_path / "1", step=200, val_step=200, **{"val/loss": 3.0})  # a new validation: its line
    printer.update(snapshot(study, now=NOW + 10))
    assert "trial 1 E-learned: training, step 200/300" in out.getvalue() and "val/loss 3.000" in out.getvalue()
    assert "attn-additive" not in out.getvalue()
    out.truncate(0), out.seek(0)
    printer.update(snapshot(study, now=NOW + 70))  # a minute on: every running trial again, and the counts
    assert "E-learned" in out.getvalue() and "attn-additive" in out.getvalue() and "quickstart: running 2" in out.getvalue()


def test_a_trial_that_ends_is_announced_once_with_its_result(tmp_path):
    study = optuna.create_study(study_name="s", direction="minimize")
    add(study, TrialState.RUNNING, "base", tmp_path / "0")
    progress(tmp_path / "0")
    out = io.StringIO()
    printer = PlainPrinter(out, every_s=60)
    printer.update(snapshot(study, now=NOW))
    trial = optuna.trial.Trial(study, study.get_trials(deepcopy=False)[0]._trial_id)
    trial.set_user_attr("val/loss", 2.5)
    study.tell(trial, 2.5)
    printer.update(snapshot(study, now=NOW + 1))
    printer.update(snapshot(study, now=NOW + 2))
    assert out.getvalue().count("trial 0 base: finished") == 1
    assert (
        "s: running 0, finished 1, pruned 0, failed 0; best: base (trial 0) objective 2.5, val/bleu 12.80, val/loss 2.500" in out.getvalue()
    )


def test_progress_of_an_earlier_attempt_a_stale_file_and_a_trial_on_another_machine(tmp_path):
    study = optuna.create_study(study_name="s", direction="maximize")
    add(study, TrialState.RUNNING, "continued", tmp_path / "0")
    progress(tmp_path / "0", updated=NOW - 600)  # written before this trial started: the earlier attempt's
    add(study, TrialState.RUNNING, "hung", tmp_path / "1", started=NOW - 1000)
    progress(tmp_path / "1", updated=NOW - 400)
    add(study, TrialState.RUNNING, "remote", "/nonexistent/run", intermediate={150: 17.25})
    lines = plain_lines(snapshot(study, now=NOW))
    assert lines[0] == "trial 0 continued: starting, step -, - tok/s, ETA -, val/loss -, val/bleu -"
    assert lines[1].startswith("trial 1 hung: training, step 120/300") and lines[1].endswith("(no progress for 6m40s)")
    assert lines[2] == "trial 2 remote: starting, step -, - tok/s, ETA -, val/loss -, val/bleu - (reported 17.25 at step 150)"
    assert lines[3] == "s: running 3, finished 0, pruned 0, failed 0; best: none finished yet"


def test_an_interrupted_trial_whose_row_started_again_is_continued_and_the_study_says_how_long_is_left(tmp_path):
    study = optuna.create_study(study_name="s", direction="maximize")
    add(study, TrialState.COMPLETE, "base-s2", tmp_path / "0", value=30.0, row=("base", 2), wall_seconds=600.0)
    add(study, TrialState.FAIL, "base-s1", tmp_path / "1", row=("base", 1), interrupted=True)
    add(study, TrialState.FAIL, "A-h1-s1", tmp_path / "2", row=("A-h1", 1), interrupted=True)
    add(study, TrialState.RUNNING, "base-s1", tmp_path / "1", row=("base", 1), continues=1)
    progress(tmp_path / "1", eta_upper=True)  # ETA 92 s at most: a stopping rule may end it sooner
    study.enqueue_trial({"row": "A-h1", "seed": 1})
    lines = plain_lines(snapshot(study, now=NOW), all_trials=True)
    assert lines[1] == "trial 1 base-s1: continued, step -, - tok/s, ETA -, val/loss -, val/bleu - (continued by trial 3)"
    assert "trial 3 base-s1: training, step 120/300, epochs 0.40, 2,031 tok/s, ETA ≤1m32s," in lines[3]
    assert lines[2].startswith("trial 2 A-h1-s1: interrupted") and lines[2].endswith("(interrupted, continues on the next run)")
    # Only A-h1-s1 still waits to continue; what is left: the waiting row at the finished trial's 600 s, plus the
    # running one's ETA, one trial at a time: (600 + 92) s.
    assert lines[-1].startswith(
        "s: running 1, finished 1, pruned 0, failed 0, interrupted 1, waiting 1; about 11m32s left at 1 at a time; best:"
    )


def test_a_gpu_column_appears_only_once_a_trial_ran_on_a_gpu(tmp_path):
    study = crafted(tmp_path)

    def rich_text() -> str:
        console = Console(record=True, width=200, file=io.StringIO())
        console.print(render(snapshot(study, now=NOW)))
        return console.export_text()

    assert not re.search(r"\bgpu\b", rich_text())  # a CPU sweep's picture is unchanged
    add(study, TrialState.RUNNING, "kv-mqa", tmp_path / "6", gpu="1")
    progress(tmp_path / "6")
    text = rich_text()
    assert re.search(r"#\s+row\s+state\s+gpu\s+step", text), text
    assert re.search(r"kv-mqa\s+training\s+1\s+120/300", text) and re.search(r"E-learned\s+training\s+-\s+120/300", text), text
    lines = plain_lines(snapshot(study, now=NOW))
    assert "trial 7 kv-mqa: training, gpu 1, step 120/300, epochs 0.40, 2,031 tok/s" in lines[2]
    assert lines[0].startswith("trial 1 E-learned: training, step 120/300")  # no gpu recorded: none shown


def test_a_running_trial_whose_training_ended_is_not_taken_for_a_hung_one(tmp_path):
    """Its progress file says `finished` (a run's final evaluation, a member its rules stopped while its group trains
    on) or `stopped`: the line says so, however long ago the file was written."""
    study = optuna.create_study(study_name="s", direction="maximize")
    add(study, TrialState.RUNNING, "member", tmp_path / "0", started=NOW - 1000)
    progress(tmp_path / "0", phase="finished", updated=NOW - 400)
    add(study, TrialState.RUNNING, "diverged", tmp_path / "1", started=NOW - 1000)
    progress(tmp_path / "1", phase="stopped", updated=NOW - 10)
    lines = plain_lines(snapshot(study, now=NOW))
    assert lines[0].startswith("trial 0 member: training, step 120/300") and lines[0].endswith("(training done, its end to come)")
    assert lines[1].endswith("(training stopped, its end to come)")


@pytest.mark.parametrize("raw", ["30s", "0", "-5", "nan", ""])
def test_a_bad_progress_interval_is_refused_naming_the_variable_and_only_where_it_is_used(tmp_path, monkeypatch, capsys, raw):
    """It was read at import, so every command that loads the sweep package (status, a dry run) failed with
    "could not convert string to float: '30s'", naming nothing."""
    monkeypatch.setenv("ABLATE_PROGRESS_EVERY", raw)
    with pytest.raises(ValueError, match=re.escape(f"ABLATE_PROGRESS_EVERY={raw!r} is not a number of seconds above 0")):
        PlainPrinter(io.StringIO())
    path = write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\n")
    monkeypatch.setenv("ABLATE_DATA_DIR", str(multi30k_names(tmp_path / "data")))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    capsys.readouterr()
    assert main(["sweep", str(path)]) == 2  # plain progress lines (not a terminal): refused before its study exists
    assert f"ABLATE_PROGRESS_EVERY={raw!r}" in capsys.readouterr().err and not (tmp_path / "out").exists()
    monkeypatch.setenv("ABLATE_PROGRESS_EVERY", "2.5")
    assert PlainPrinter(io.StringIO()).every_s == 2.5
    monkeypatch.setenv("ABLATE_PROGRESS_EVERY", "inf")  # lines at validations and phases only, as before
    assert PlainPrinter(io.StringIO()).every_s == float("inf")
    monkeypatch.delenv("ABLATE_PROGRESS_EVERY")
    assert PlainPrinter(io.StringIO()).every_s == 60


def test_a_waiting_trial_is_counted_at_the_finished_ones_time_from_start_to_end_not_their_training_time(tmp_path):
    """The summary's wall_seconds (training and validation) left out the process's start, the data and the run's end:
    "about 10s left" stood for half a minute of trials that took 55 s."""
    study = optuna.create_study(study_name="s", direction="maximize")
    add(study, TrialState.COMPLETE, "base-s1", tmp_path / "0", value=30.0, row=("base", 1), wall_seconds=9.6)  # 30 s, start to end
    study.enqueue_trial({"row": "base", "seed": 2})
    assert plain_lines(snapshot(study, now=NOW))[-1].startswith("s: running 0, finished 1, pruned 0, failed 0, waiting 1; about 30s left")
