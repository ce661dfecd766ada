"""A healthy run prints nothing alarming: dependency messages are fixed at their cause or filtered by exact text and
origin, and everything else (ablate's own warnings, other messages of the same dependency) still shows."""

from __future__ import annotations

import logging
import warnings

from lightning.fabric.utilities.warnings import PossibleUserWarning

from ablate.run.loggers import make_csv_logger
from ablate.run.quiet import CHECKPOINT_DIR, LEAFSPEC, LITLOGGER_TIP, NOT_RESUMABLE, RANK_ZERO_LOGGERS, quiet_dependencies


def shown(out, message: str, category: type[Warning], module: str) -> bool:
    """Whether a warning with this text, emitted from `module`, gets through once the run's filters are installed."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        quiet_dependencies(out)  # in front of "always", as in a run
        warnings.warn_explicit(message, category, filename=module.replace(".", "/") + ".py", lineno=1, module=module)
    return bool(got)


def test_the_filtered_warnings_need_their_exact_text_and_their_origin(tmp_path):
    ckpt = CHECKPOINT_DIR.format(tmp_path / "checkpoints")
    cases = [
        (LEAFSPEC, FutureWarning, "lightning.pytorch.utilities._pytree"),
        (ckpt, UserWarning, "lightning.pytorch.callbacks.model_checkpoint"),
        (NOT_RESUMABLE + " Consider using an end-of-epoch checkpoint", PossibleUserWarning, "lightning.pytorch.loops.training_epoch_loop"),
    ]
    for message, category, module in cases:
        assert not shown(tmp_path, message, category, module), message
        assert shown(tmp_path, message, category, "ablate.run.train"), message  # ablate's own (or anyone else's) still shows
        assert shown(tmp_path, "something else entirely", category, module)  # the module's other warnings still show
    # Another run's checkpoints (not this run's, which only a resume finds non-empty) are still reported.
    assert shown(tmp_path, CHECKPOINT_DIR.format(tmp_path / "elsewhere"), UserWarning, "lightning.pytorch.callbacks.model_checkpoint")


def test_the_litlogger_tip_is_dropped_by_its_exact_text_on_lightnings_rank_zero_logger_only(tmp_path, caplog):
    quiet_dependencies(tmp_path)
    quiet_dependencies(tmp_path)  # idempotent: one filter per logger
    for name in RANK_ZERO_LOGGERS:
        logger = logging.getLogger(name)
        assert len([f for f in logger.filters if type(f).__name__ == "_DropMessage"]) == 1
        with caplog.at_level(logging.INFO, logger=name):
            caplog.clear()
            logger.info(LITLOGGER_TIP)
            logger.info("GPU available: False, used: False")
            logger.warning(LITLOGGER_TIP + " (changed)")
        assert [r.getMessage() for r in caplog.records] == ["GPU available: False, used: False", LITLOGGER_TIP + " (changed)"]


def test_metrics_csv_lands_in_the_run_directory_beside_its_files_without_a_warning(tmp_path):
    (tmp_path / "config.yaml").write_text("seed: 1\n")
    (tmp_path / "checkpoints").mkdir()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        logger = make_csv_logger(tmp_path, 0)
        logger.log_metrics({"train/loss": 1.5}, step=1)
        logger.save()
        resumed = make_csv_logger(tmp_path, 1)
        resumed.log_metrics({"train/loss": 1.25}, step=2)
        resumed.save()
    assert not got, [str(w.message) for w in got]
    assert (tmp_path / "metrics.csv").read_text().splitlines() == ["step,train/loss", "1,1.5"]
    assert (tmp_path / "resume-1" / "metrics.csv").read_text().splitlines() == ["step,train/loss", "2,1.25"]
    assert (tmp_path / "config.yaml").exists()


def test_the_wandb_logger_passes_no_anonymous_setting(tmp_path):
    from helpers import tiny_experiment

    from ablate.run.loggers import make_wandb_logger

    cfg = tiny_experiment(tmp_path, logging={"wandb": True, "mode": "offline"})
    logger = make_wandb_logger(cfg, tmp_path, {})
    assert "anonymous" not in logger._wandb_init and logger._wandb_init["mode"] == "offline"
