"""What a healthy run does not print: messages of dependencies that are wrong or not actionable for an ablate run,
each filtered by its exact text and the module that emits it, so ablate's own warnings and every other message of
a dependency still show. (Causes fixed where they arise live elsewhere: the CSV logger's "previous log files will
be deleted" in ablate.run.loggers, wandb's "anonymous setting" in make_wandb_logger.)
"""

from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path

from lightning.fabric.utilities.warnings import PossibleUserWarning

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
    def __init__(self, message: str):
        super().__init__()
        self.message = message

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != self.message


def quiet_dependencies(out: str | Path) -> None:
    """Install the filters for a run writing to `out` (idempotent: filterwarnings replaces an equal filter)."""
    warnings.filterwarnings("ignore", message=re.escape(LEAFSPEC), category=FutureWarning, module=LEAFSPEC_MODULE)
    ckpt_dir = Path(out) / "checkpoints"
    warnings.filterwarnings(
        "ignore", message=re.escape(CHECKPOINT_DIR.format(ckpt_dir)) + r"\Z", category=UserWarning, module=CHECKPOINT_MODULE
    )
    warnings.filterwarnings("ignore", message=re.escape(NOT_RESUMABLE), category=PossibleUserWarning, module=NOT_RESUMABLE_MODULE)
    for name in RANK_ZERO_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropMessage) and f.message == LITLOGGER_TIP for f in logger.filters):
            logger.addFilter(_DropMessage(LITLOGGER_TIP))
