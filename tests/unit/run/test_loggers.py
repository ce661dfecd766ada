"""A run's W&B logger, through a real offline run: what its file says about the run; and how a run closes it."""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import pytest
from helpers import tiny_experiment

from ablate.files.wandb_offline import find_runs, read_run
from ablate.run.loggers import finish_wandb, make_wandb_logger


@pytest.mark.slow  # a W&B offline run started and read back: seconds; the default set stays under a minute
def test_a_runs_tags_are_kept_once_and_a_sweep_trial_says_so_by_its_job_type(tmp_path):
    import wandb

    for name, study in (("alone", None), ("trial", "demo")):
        cfg = tiny_experiment(tmp_path / name, logging={"wandb": True, "mode": "offline", "tags": ["base", "paper", "base"]})
        cfg.sweep.study = study
        logger = make_wandb_logger(cfg, tmp_path / name, {})
        logger.experiment.finish()
    wandb.teardown()  # finish() returns before the service writes the run files
    runs = {read_run(p).path.parts[len(tmp_path.parts)]: read_run(p) for p in find_runs(tmp_path)}
    assert {k: (r.tags, r.job_type) for k, r in runs.items()} == {
        "alone": (["base", "paper"], "train"),
        "trial": (["base", "paper"], "sweep-trial"),
    }


def test_a_resumed_run_continues_its_earlier_attempts_wandb_run_id(tmp_path):
    """A resume added a second W&B run of the same row and seed, which `ablate table --wandb` refused ("two runs of
    seed 1"); each attempt's offline directory is named for the run id, the newest attempt's is continued."""
    from ablate.run.loggers import earlier_wandb_id

    out = tmp_path
    assert earlier_wandb_id(out) is None
    for name in ("offline-run-20261207_024856-ken4i13o", "offline-run-20261207_025405-ken4i13o", "latest-run"):
        (out / "wandb" / name).mkdir(parents=True)
    (out / "wandb" / "debug.log").write_text("")
    assert earlier_wandb_id(out) == "ken4i13o"
    (out / "wandb" / "run-20261208_000000-online01").mkdir()  # an online attempt, later
    assert earlier_wandb_id(out) == "online01"


@pytest.mark.slow  # two W&B offline runs started and read back: seconds
def test_a_second_attempts_wandb_logger_takes_the_first_ones_id(tmp_path):
    import wandb

    cfg = tiny_experiment(tmp_path / "run", logging={"wandb": True, "mode": "offline"})
    ids = []
    for _ in range(2):
        logger = make_wandb_logger(cfg, tmp_path / "run", {})
        ids.append(logger.experiment.id)
        logger.experiment.finish()
    wandb.teardown()
    assert ids[0] == ids[1] and {read_run(p).run_id for p in find_runs(tmp_path)} == {ids[0]}


def test_a_run_stopped_before_logging_closes_no_wandb_run_and_imports_nothing(monkeypatch):
    """A Ctrl-C while Lightning first imported wandb left a partly imported module; closing the run imported wandb
    again, which failed (AttributeError, a circular import), and a sweep recorded the interrupted trial as failed. A
    logger that started no run closes nothing and imports nothing."""
    monkeypatch.delitem(sys.modules, "wandb", raising=False)
    finish_wandb(SimpleNamespace(_experiment=None))
    finish_wandb(None)
    assert "wandb" not in sys.modules


def test_a_wandb_run_that_fails_to_close_is_a_warning_not_the_runs_end(caplog):
    closed = []
    finish_wandb(SimpleNamespace(_experiment=SimpleNamespace(finish=lambda: closed.append(1))))
    assert closed == [1]

    def refuse():
        raise RuntimeError("service gone; api_key=abc123secret")

    with caplog.at_level(logging.WARNING):
        finish_wandb(SimpleNamespace(_experiment=SimpleNamespace(finish=refuse)))
    assert "W&B run not closed cleanly (RuntimeError: service gone" in caplog.text and "abc123secret" not in caplog.text
