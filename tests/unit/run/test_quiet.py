"""A healthy run prints nothing alarming: dependency messages are fixed at their cause or filtered by exact text and
origin, and everything else (ablate's own warnings, other messages of the same dependency) still shows."""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager

import lightning as L
import lightning_utilities.core.rank_zero as rank_zero
import optuna
import torch
from lightning.fabric.accelerators import cuda
from lightning.fabric.utilities.warnings import PossibleUserWarning
from lightning.pytorch.trainer.connectors import data_connector
from lightning.pytorch.utilities.rank_zero import rank_zero_info

from ablate.run.loggers import make_csv_logger
from ablate.run.quiet import (
    CHECKPOINT_DIR,
    LEAFSPEC,
    LITLOGGER_TIP,
    NOT_RESUMABLE,
    RANK_ZERO_LOGGERS,
    quiet_dependencies,
    quiet_libraries,
)

FEW_WORKERS = (
    "The 'train_dataloader' does not have many workers which may be a bottleneck. Consider increasing the value of the"
    " `num_workers` argument` to `num_workers=15` in the `DataLoader` to improve performance."
)


@contextmanager
def shown_on(name: str):
    """The messages logger `name` passes at INFO and up (its filters apply before any handler)."""
    got: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: got.append(record.getMessage())
    logger = logging.getLogger(name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield got
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


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
        (FEW_WORKERS, PossibleUserWarning, "lightning.pytorch.trainer.connectors.data_connector"),
    ]
    for message, category, module in cases:
        assert not shown(tmp_path, message, category, module), message
        assert shown(tmp_path, message, category, "ablate.run.train"), message  # ablate's own (or anyone else's) still shows
        assert shown(tmp_path, "something else entirely", category, module)  # the module's other warnings still show
    # Another run's checkpoints (not this run's, which only a resume finds non-empty) are still reported.
    assert shown(tmp_path, CHECKPOINT_DIR.format(tmp_path / "elsewhere"), UserWarning, "lightning.pytorch.callbacks.model_checkpoint")


def test_a_relative_out_dirs_checkpoint_warning_is_dropped_as_lightning_words_it(tmp_path, monkeypatch):
    """ModelCheckpoint names its folder by its real path: `ablate train ... out_dir=runs/x --resume` printed the
    warning, the filter holding the relative path."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path / "link")
    message = CHECKPOINT_DIR.format(tmp_path / "real" / "runs" / "x" / "checkpoints")
    assert not shown("runs/x", message, UserWarning, "lightning.pytorch.callbacks.model_checkpoint")


def test_the_litlogger_tip_is_dropped_by_its_exact_text_on_lightnings_rank_zero_logger_only(tmp_path):
    quiet_dependencies(tmp_path)
    counts = {name: len(logging.getLogger(name).filters) for name in RANK_ZERO_LOGGERS}
    quiet_dependencies(tmp_path)  # idempotent: no filter twice
    assert {name: len(logging.getLogger(name).filters) for name in RANK_ZERO_LOGGERS} == counts
    for name in RANK_ZERO_LOGGERS:
        with shown_on(name) as got:
            logger = logging.getLogger(name)
            logger.info(LITLOGGER_TIP)
            logger.info("Something else entirely")
            logger.warning(LITLOGGER_TIP + " (changed)")
        assert got == ["Something else entirely", LITLOGGER_TIP + " (changed)"]


def test_lightnings_lines_of_every_fit_are_dropped_and_its_other_lines_still_show():
    """Lightning's own code emits them (a Trainer built, a fit's end); a changed text or another line still shows."""
    quiet_libraries()
    with shown_on(rank_zero.log.name) as got:  # the logger Lightning's rank_zero_info writes to
        L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, val_check_interval=1.0)
        rank_zero_info("`Trainer.fit` stopped: `max_steps=10` reached.")  # as fit_loop says it
        rank_zero_info("`Trainer.fit` stopped: `max_epochs=3` reached.")
        rank_zero_info("`Trainer.fit` stopped: No training batches.")  # a problem: shown
        rank_zero_info("GPU available: False, used: False, and something new")
        L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, limit_val_batches=1)
    assert got == [
        "`Trainer.fit` stopped: No training batches.",
        "GPU available: False, used: False, and something new",
        "`Trainer(limit_val_batches=1)` was configured so 1 batch will be used.",
    ]


def test_the_tensor_core_advice_is_dropped_since_ablate_sets_the_precision(monkeypatch):
    """Lightning's check as it runs on an H100 under fp32's "highest"; other text on its logger still shows."""
    quiet_libraries()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(cuda, "_is_ampere_or_later", lambda device=None: True)
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "highest")
    with shown_on(rank_zero.log.name) as got:
        cuda._check_cuda_matmul_precision.__wrapped__(torch.device("cuda", 0))  # unwrapped: its cache says once per process
        rank_zero_info("You are using a CUDA device ('NVIDIA H100 80GB HBM3') that has Tensor Cores.")
    assert got == ["You are using a CUDA device ('NVIDIA H100 80GB HBM3') that has Tensor Cores."]


def test_the_few_workers_advice_is_dropped_as_lightning_emits_it(tmp_path, monkeypatch):
    quiet_dependencies(tmp_path)
    monkeypatch.setattr(data_connector, "suggested_max_num_workers", lambda devices: 15)  # a 16-core machine
    loader = torch.utils.data.DataLoader(list(range(4)))
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        quiet_dependencies(tmp_path)  # in front of "always", as in a run
        data_connector._worker_check(trainer, loader, "train_dataloader")
        warnings.warn(FEW_WORKERS, PossibleUserWarning, stacklevel=1)  # the same text from elsewhere (this test) still shows
    assert [str(w.message) for w in got] == [FEW_WORKERS]


def test_optunas_study_announcements_are_dropped_and_its_other_lines_show(tmp_path):
    quiet_libraries()
    url = f"sqlite:///{tmp_path / 'study.db'}"
    names = ("optuna.storages._rdb.storage", "optuna.storages._in_memory", "optuna.study.study")
    with shown_on(names[0]) as rdb, shown_on(names[1]) as memory, shown_on(names[2]) as study:
        optuna.create_study(study_name="s", storage=url)  # "A new study created in RDB with name: s"
        optuna.create_study(study_name="s", storage=url, load_if_exists=True)  # "Using an existing study ..."
        optuna.create_study(study_name="m")  # "A new study created in memory with name: m"
        # Optuna 4.x's wording of the same (pyproject allows >= 4.9)
        logging.getLogger(names[2]).info("Using an existing study with name 's' instead of creating a new one.")
        for name in names:
            logging.getLogger(name).info("A new study created, and more to say")
    assert rdb == memory == study == ["A new study created, and more to say"]


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
