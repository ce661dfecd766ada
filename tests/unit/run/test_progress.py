"""A run's progress.json and progress bar, driven by a stand-in trainer and a stand-in clock."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from ablate.run import progress as progress_module
from ablate.run.progress import ProgressBar, ProgressFile, epochs_done
from ablate.run.progress_file import PROGRESS_FILE, format_duration, format_eta, read_progress
from ablate.run.train import epochs_trained


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", c)
    monkeypatch.setattr(progress_module.time, "time", c)
    return c


def trainer(**kw):
    base = dict(
        estimated_stepping_batches=100,
        max_epochs=-1,
        global_step=0,
        current_epoch=0,
        is_global_zero=True,
        sanity_checking=False,
        callback_metrics={},
        num_training_batches=100,
        accumulate_grad_batches=1,
    )
    return SimpleNamespace(**{**base, **kw})


def step(cb, tr, clock, seconds=1.0, tokens=500):
    cb.on_train_batch_start(tr, None, {}, 0)
    clock.t += seconds
    tr.global_step += 1
    cb.on_train_batch_end(tr, None, None, {"tgt_tokens": torch.tensor(tokens)}, 0)


def test_progress_file_tracks_steps_tokens_per_second_eta_and_the_latest_validation(tmp_path, clock):
    cb, tr = ProgressFile(tmp_path, every_s=0), trainer()
    cb.on_train_start(tr, None)
    assert read_progress(tmp_path)["max_steps"] == 100 and read_progress(tmp_path)["step"] == 0
    for _ in range(10):
        step(cb, tr, clock)
    p = read_progress(tmp_path)
    assert (p["phase"], p["step"], p["tokens_per_s"], p["eta_s"]) == ("training", 10, 500.0, 90.0)
    cb.on_validation_start(tr, None)
    assert read_progress(tmp_path)["phase"] == "validating"
    clock.t += 10.0  # validation took as long as the training so far: the ETA counts it at that share
    tr.callback_metrics = {"val/loss": torch.tensor(3.25), "val/bleu": torch.tensor(12.5), "val/ppl": torch.tensor(9.0)}
    cb.on_validation_end(tr, None)
    step(cb, tr, clock)
    p = read_progress(tmp_path)
    assert (p["phase"], p["val/loss"], p["val/bleu"], p["val_step"]) == ("training", 3.25, 12.5, 10)
    assert p["tokens_per_s"] == 500.0  # the validation's 10 s are not training time
    assert p["eta_s"] == pytest.approx(89 * 1.0 * (1 + 10 / 11), abs=0.1)
    cb.on_train_end(tr, None)
    assert read_progress(tmp_path)["phase"] == "finished"
    assert not [f for f in tmp_path.iterdir() if f.name != PROGRESS_FILE]  # no temp file left behind


def test_a_fit_with_nothing_left_to_train_leaves_the_file_finished_at_the_runs_step(tmp_path, clock):
    """A resume after the last step (to run the end again): Lightning skips the fit loop, so neither on_train_start
    nor on_train_end fires, and the final validation left "training, step 0" for `ablate status` to show."""
    cb, tr = ProgressFile(tmp_path, every_s=0), trainer(global_step=100, current_epoch=1)
    cb.on_fit_end(tr, None)
    cb.on_validation_start(tr, None)  # the final weights' validation, after the fit
    tr.callback_metrics = {"val/loss": torch.tensor(2.5)}
    cb.on_validation_end(tr, None)
    p = read_progress(tmp_path)
    assert (p["phase"], p["step"], p["max_steps"], p["val/loss"], p["val_step"]) == ("finished", 100, 100, 2.5, 100)
    ran = ProgressFile(tmp_path / "ran", every_s=0)  # a fit that trained: its own hooks wrote the end, left as they are
    ran.on_train_start(tr, None)
    ran.on_train_end(tr, None)
    before = read_progress(tmp_path / "ran")
    clock.t += 5
    ran.on_fit_end(tr, None)
    assert read_progress(tmp_path / "ran") == before


def test_writes_are_throttled_but_validations_always_written_and_other_ranks_never_write(tmp_path, clock):
    cb, tr = ProgressFile(tmp_path, every_s=5), trainer()
    cb.on_train_start(tr, None)
    step(cb, tr, clock)
    assert read_progress(tmp_path)["step"] == 0  # 1 s after the last write
    step(cb, tr, clock, seconds=5)
    assert read_progress(tmp_path)["step"] == 2
    tr.callback_metrics = {"val/loss": torch.tensor(2.0)}
    cb.on_validation_start(tr, None)
    cb.on_validation_end(tr, None)
    assert read_progress(tmp_path)["val/loss"] == 2.0
    other = tmp_path / "rank1"
    other.mkdir()
    cb1 = ProgressFile(other, every_s=0)
    cb1.on_train_start(trainer(is_global_zero=False), None)
    assert not (other / PROGRESS_FILE).exists()


def test_an_epoch_bounded_run_and_a_sanity_check(tmp_path, clock):
    cb, tr = ProgressFile(tmp_path, every_s=0), trainer(estimated_stepping_batches=40, max_epochs=4, sanity_checking=True)
    cb.on_train_start(tr, None)
    cb.on_validation_start(tr, None)  # Lightning's sanity check: not a validation of the run
    cb.on_validation_end(tr, None)
    p = read_progress(tmp_path)
    assert (p["max_steps"], p["max_epochs"], p["phase"], p["val_step"]) == (40, 4, "training", None)
    assert json.loads((tmp_path / PROGRESS_FILE).read_text())["updated"] == clock.t


def test_the_bar_shows_step_tokens_per_second_eta_and_the_latest_validation_but_no_version(tmp_path, clock):
    cb, tr = ProgressFile(tmp_path, every_s=0), trainer()
    cb.on_train_start(tr, None)
    for _ in range(4):
        step(cb, tr, clock, tokens=1234)
    cb.state.update({"val/loss": 3.5, "val/bleu": 20.25})
    tr.callbacks, tr.progress_bar_metrics, tr.loggers = [cb], {"train/loss": 4.0}, []
    shown = ProgressBar().get_metrics(tr, None)
    assert shown == {
        "step": "4/100",
        "epochs": "0.04",
        "tok/s": "1,234",
        "ETA": "1m36s",
        "train/loss": 4.0,
        "val/loss": 3.5,
        "val/bleu": 20.25,
    }


def test_format_duration():
    assert [format_duration(s) for s in (None, float("inf"), 0, 42.4, 185, 3725)] == ["-", "-", "0s", "42s", "3m05s", "1h02m"]


def test_a_run_that_may_stop_sooner_marks_its_eta_as_a_bound(tmp_path, clock):
    """With a convergence rule (or early stopping, a time or FLOPs budget) the ETA to max_steps is at most that."""
    cb, tr = ProgressFile(tmp_path, every_s=0, may_stop_sooner=True), trainer()
    cb.on_train_start(tr, None)
    for _ in range(4):
        step(cb, tr, clock)
    assert read_progress(tmp_path)["eta_upper"] is True
    tr.callbacks, tr.progress_bar_metrics, tr.loggers = [cb], {}, []
    assert ProgressBar().get_metrics(tr, None)["ETA"] == "≤1m36s"
    assert [format_eta(s, upper=True) for s in (None, 0.0, 96.0)] == ["-", "0s", "≤1m36s"]  # a finished run is no bound
    assert ProgressFile(tmp_path / "plain").state["eta_upper"] is False


def test_epochs_are_shown_as_epochs_done_as_the_summary_counts_them(tmp_path, clock):
    """One convention wherever ablate shows epochs: epochs completed, a partial one as its fraction (1.00 once the
    first whole epoch is trained, as summary.json's `epochs`), never Lightning's 0-based index ("Epoch 0")."""
    tr = trainer(num_training_batches=10, accumulate_grad_batches=4, estimated_stepping_batches=6, max_epochs=2)
    cb = ProgressFile(tmp_path, every_s=0)
    cb.on_train_start(tr, None)
    assert read_progress(tmp_path)["epochs"] == 0.0
    seen = []
    for _ in range(4):  # an epoch is ceil(10 / 4) = 3 optimizer steps; Lightning's current_epoch stays 0 meanwhile
        step(cb, tr, clock)
        seen.append(read_progress(tmp_path)["epochs"])
        assert seen[-1] == epochs_done(tr) == epochs_trained(tr, 4)  # what summary.json will record
    assert seen == [0.33, 0.67, 1.0, 1.33]
    tr.callbacks, tr.progress_bar_metrics, tr.loggers = [cb], {}, []
    bar = ProgressBar()
    assert bar.get_metrics(tr, None)["epochs"] == "1.33/2"
    assert bar._get_train_description(tr.current_epoch).strip() == "Training"
    cb.on_train_end(tr, None)
    assert read_progress(tmp_path)["epochs"] == 1.33
    assert epochs_done(trainer(num_training_batches=float("inf"))) is None  # an endless loader: no epoch length
    tr.callbacks = [ProgressFile(tmp_path / "unknown")]
    assert bar.get_metrics(tr, None)["epochs"] == "-"


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        "null",
        "[" * 100_000 + "]" * 100_000,
        '{"phase": 3}',
        '{"phase": "training", "step": "ten"}',
        '{"val/loss": true}',
    ],
    ids=["not-json", "list", "null", "deep", "phase-number", "step-text", "loss-bool"],
)
def test_a_progress_file_that_cannot_be_read_is_none_as_documented(tmp_path, text):
    (tmp_path / PROGRESS_FILE).write_text(text)
    assert read_progress(tmp_path) is None


def rendered_lines(columns: list, fields: str, width: int, metrics_column=None) -> list[str]:
    """The training bar's row as rich draws it at `width` columns: `columns`, then the fields' text."""
    import io

    from rich.console import Console
    from rich.progress import Progress, TextColumn

    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    bar = Progress(*columns, TextColumn(fields, table_column=metrics_column), console=console, auto_refresh=False)
    bar.add_task("Training  ", total=300, completed=150)
    console.print(bar.make_tasks_table(bar.tasks))
    return out.getvalue().rstrip("\n").split("\n")


# The quickstart's last fields as the bar shows them ("name: value", Lightning's metrics column)
FIELDS = "step: 300/300 epochs: 0.97 tok/s: 1,238 ETA: 0s train/loss: 4.267 val/loss: 4.141 val/bleu: 12.686"


def test_the_bar_stays_on_one_line_in_a_120_column_terminal():
    """Lightning's own columns (batches, times, it/s) beside the fields wrapped them onto three lines at 120 columns;
    ablate's bar drops what the fields repeat, and cuts (…) rather than wraps where a terminal is narrower still."""
    from lightning.pytorch.callbacks import RichProgressBar
    from rich.table import Column

    lightning = rendered_lines(RichProgressBar().configure_columns(None), FIELDS, 120, Column())
    assert len(lightning) > 1  # what `ablate train` showed before
    (line,) = rendered_lines(ProgressBar().configure_columns(None), FIELDS, 120, ProgressBar.METRICS_COLUMN)
    assert line.startswith("Training") and line.endswith("val/bleu: 12.686") and "━" in line
    (narrow,) = rendered_lines(ProgressBar().configure_columns(None), FIELDS, 80, ProgressBar.METRICS_COLUMN)
    assert narrow.endswith("…") and len(narrow) == 80


def test_without_a_terminal_the_fields_come_as_plain_lines_every_so_often_and_after_each_validation(tmp_path, clock):
    import io

    from ablate.run.progress import PlainProgress

    cb, tr = ProgressFile(tmp_path, every_s=0), trainer(progress_bar_metrics={"train/loss": 4.5, "v_num": 0})
    tr.callbacks, tr.state = [cb], SimpleNamespace(fn="fit")
    out = io.StringIO()
    plain = PlainProgress(every_s=30, out=out)
    cb.on_train_start(tr, None)
    plain.on_train_start(tr, None)
    for _ in range(35):  # 2 s a step: a line at 30 s and at 60 s of training
        step(cb, tr, clock, seconds=2.0, tokens=1000)
        plain.on_train_batch_end(tr, None, None, {}, 0)
    lines = out.getvalue().splitlines()
    assert lines == [
        "training: step 15/100, epochs 0.15, tok/s 500, ETA 2m50s, train/loss 4.500",
        "training: step 30/100, epochs 0.30, tok/s 500, ETA 2m20s, train/loss 4.500",
    ]
    tr.callback_metrics = {"val/loss": torch.tensor(4.25), "val/bleu": torch.tensor(12.5)}
    cb.on_validation_start(tr, None)
    cb.on_validation_end(tr, None)
    plain.on_validation_end(tr, None)
    assert out.getvalue().splitlines()[-1] == (
        "validated: step 35/100, epochs 0.35, tok/s 500, ETA 2m10s, train/loss 4.500, val/loss 4.250, val/bleu 12.500"
    )
    tr.sanity_checking = True  # Lightning's sanity check is no validation of the run
    plain.on_validation_end(tr, None)
    assert len(out.getvalue().splitlines()) == 3


def test_the_final_weights_validation_after_training_leaves_a_finished_run_finished(tmp_path, clock):
    cb, tr = ProgressFile(tmp_path, every_s=0), trainer()
    cb.on_train_start(tr, None)
    step(cb, tr, clock)
    cb.on_train_end(tr, None)
    cb.on_validation_start(tr, None)  # off the validation grid, after fit (ablate.run.train)
    assert read_progress(tmp_path)["phase"] == "validating"
    tr.callback_metrics = {"val/loss": torch.tensor(2.5)}
    cb.on_validation_end(tr, None)
    p = read_progress(tmp_path)
    assert (p["phase"], p["val/loss"], p["val_step"]) == ("finished", 2.5, 1)


def test_a_resume_stopped_before_it_trained_leaves_the_run_where_its_last_attempt_left_it(tmp_path, clock):
    """Signals review: Ctrl-C while a --resume loaded set progress.json back to step 0 with no scores, so `ablate
    status` and a sweep's live view showed the run stopped at step 0 until it trained again."""
    first, tr = ProgressFile(tmp_path, every_s=0), trainer()
    first.on_train_start(tr, None)
    for _ in range(11):
        step(first, tr, clock)
    tr.callback_metrics = {"val/loss": torch.tensor(2.5), "val/bleu": torch.tensor(9.0)}
    first.on_validation_start(tr, None)
    first.on_validation_end(tr, None)
    first.on_exception(tr, None, KeyboardInterrupt())
    ProgressFile(tmp_path, every_s=0).on_exception(trainer(), None, KeyboardInterrupt())  # the resume, before training
    p = read_progress(tmp_path)
    assert (p["phase"], p["step"], p["val/bleu"], p["val_step"]) == ("stopped", 11, 9.0, 11)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    ProgressFile(fresh, every_s=0).on_exception(trainer(), None, KeyboardInterrupt())  # a new run: its own state
    assert (read_progress(fresh)["phase"], read_progress(fresh)["step"]) == ("stopped", 0)
