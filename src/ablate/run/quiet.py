"""What a healthy run does not print: messages of dependencies that are wrong or not actionable for an ablate run,
each filtered by its exact text (a pattern only where the text holds a value: a device name, a count) and the logger
or module that emits it, so ablate's own warnings and every other message of a dependency still show. (Causes fixed
where they arise live elsewhere: the CSV logger's "previous log files will be deleted" in ablate.run.loggers, wandb's
"anonymous setting" in make_wandb_logger.)
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from pathlib import Path

# torch >= 2.10 deprecates LeafSpec, which Lightning's _pytree helper still builds on every fit; nothing to act on here.
LEAFSPEC = "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec) and treespec.is_leaf()` instead."
LEAFSPEC_MODULE = r"lightning\.pytorch\.utilities\._pytree\Z"
# Lightning advertises its cloud logger at every Trainer construction, at INFO through its rank-zero logger (named
# after whichever of lightning.fabric / lightning.pytorch was imported last).
LITLOGGER_TIP = (
    "💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger](https://pypi.org/project/litlogger/)"
    " to enable LitLogger, which logs metrics and artifacts automatically to the Lightning Experiments platform."
)
RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
# Lightning's other INFO lines of every fit, through the same logger. The device summary (the GPU line also in its
# "True (cuda)" and "True (mps)" forms); the end of a fit at its step or epoch limit (the run's summary records
# stop_reason); the Ctrl-C it caught (ablate.run.trainer.fit_or_exit says whether anything was saved); the note that
# validation runs at each epoch's end (ablate's schedule when train.val_every_steps is 0);
# and on an Ampere or later GPU the advice to lower fp32 matmul precision, which ablate sets from train.precision
# (train.matmul_precision; the summary records it), so "highest" under fp32 is a choice, not an oversight.
RANK_ZERO_INFO = (
    r"GPU available: (False|True \((cuda|mps)\)), used: (False|True)",
    r"TPU available: (False|True), using: \d+ TPU cores",
    r"`Trainer\.fit` stopped: `max_(steps|epochs)=\d+` reached\.",
    re.escape("\nDetected KeyboardInterrupt, attempting graceful shutdown ..."),  # ablate's own line says what stopped
    re.escape("`Trainer(val_check_interval=1.0)` was configured so validation will run at the end of the training epoch.."),
    r"You are using a CUDA device \('[^']*'\) that has Tensor Cores\. "
    + re.escape(
        "To properly utilize them, you should set `torch.set_float32_matmul_precision('medium' | 'high')` which will trade-off"
        " precision for performance. For more details, read https://pytorch.org/docs/stable/generated/"
        "torch.set_float32_matmul_precision.html#torch.set_float32_matmul_precision"
    ),
)
# Optuna announces the study at every `ablate sweep` (ablate's own lines name the study and its storage), at INFO
# through the storage's logger (RDB for SQLite and servers, Journal for a journal file; memory in tests).
OPTUNA_STUDY = {
    "optuna.storages._rdb.storage": r"A new study created in RDB with name: .*",
    "optuna.storages.journal._storage": r"A new study created in Journal with name: .*",
    "optuna.storages._in_memory": r"A new study created in memory with name: .*",
    "optuna.study.study": r"Using an existing study with (`study_name=.*`|name .*) instead of creating a new one\.",  # 5.x, 4.x
}
# The DataLoader advice to use worker processes: ablate's batches are encoded in memory before training, so there is
# nothing to load in parallel (data.num_workers is there should that change).
FEW_WORKERS = (
    r"The '(train|val)_dataloader' does not have many workers which may be a bottleneck\. Consider increasing the value "
    r"of the `num_workers` argument` to `num_workers=\d+` in the `DataLoader` to improve performance\.\Z"
)
FEW_WORKERS_MODULE = r"lightning\.pytorch\.trainer\.connectors\.data_connector\Z"
# ModelCheckpoint warns about a non-empty directory; a run's own checkpoints/ is non-empty only when the run resumes
# (prepare_out_dir refuses a fresh run over an earlier run's checkpoints).
CHECKPOINT_DIR = "Checkpoint directory {} exists and is not empty."
CHECKPOINT_MODULE = r"lightning\.pytorch\.callbacks\.model_checkpoint\Z"
# Lightning asks the DataLoader for its position on a mid-epoch resume; ablate's datamodule saves and restores the
# position in the epoch's batch order itself (TranslationDataModule.state_dict), so the run does continue exactly.
NOT_RESUMABLE = (
    "You're resuming from a checkpoint that ended before the epoch ended and your dataloader is not resumable. "
    "This can cause unreliable results if further training is done."
)
NOT_RESUMABLE_MODULE = r"lightning\.pytorch\.loops\.training_epoch_loop\Z"


class _DropMessage(logging.Filter):
    """Drops a record whose whole message is `message`, or matches `pattern` in full."""

    def __init__(self, message: str = "", pattern: str = ""):
        super().__init__()
        self.message, self.pattern = message, re.compile(pattern, re.DOTALL) if pattern else None

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return text != self.message and not (self.pattern and self.pattern.fullmatch(text))


def _drop(logger_name: str, message: str = "", pattern: str = "") -> None:
    """Add the filter once: a second call with the same text leaves one."""
    logger = logging.getLogger(logger_name)
    same = (message, pattern)
    if not any(isinstance(f, _DropMessage) and (f.message, f.pattern and f.pattern.pattern or "") == same for f in logger.filters):
        logger.addFilter(_DropMessage(message, pattern))


def quiet_libraries() -> None:
    """The log filters of any ablate process (a sweep announces its study before any run starts); idempotent."""
    for name in RANK_ZERO_LOGGERS:
        _drop(name, message=LITLOGGER_TIP)
        for pattern in RANK_ZERO_INFO:
            _drop(name, pattern=pattern)
    for name, pattern in OPTUNA_STUDY.items():
        _drop(name, pattern=pattern)


def quiet_dependencies(out: str | Path) -> None:
    """Install the filters for a run writing to `out` (idempotent: filterwarnings replaces an equal filter)."""
    quiet_libraries()
    warnings.filterwarnings("ignore", message=re.escape(LEAFSPEC), category=FutureWarning, module=LEAFSPEC_MODULE)
    ckpt_dir = os.path.realpath(Path(out).expanduser() / "checkpoints")  # as ModelCheckpoint names it: a relative out_dir's too
    warnings.filterwarnings(
        "ignore", message=re.escape(CHECKPOINT_DIR.format(ckpt_dir)) + r"\Z", category=UserWarning, module=CHECKPOINT_MODULE
    )
    from lightning.fabric.utilities.warnings import PossibleUserWarning  # here: a sweep process loads no Lightning

    warnings.filterwarnings("ignore", message=re.escape(NOT_RESUMABLE), category=PossibleUserWarning, module=NOT_RESUMABLE_MODULE)
    warnings.filterwarnings("ignore", message=FEW_WORKERS, category=PossibleUserWarning, module=FEW_WORKERS_MODULE)
