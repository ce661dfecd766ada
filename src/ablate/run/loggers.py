"""Where a run's metrics go: a CSV file per attempt in the run directory, and W&B (offline unless configured),
which must never be the reason a run dies."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger, WandbLogger

from ablate.config import ExperimentConfig, flatten, to_dict
from ablate.redact import redact

log = logging.getLogger(__name__)


def make_csv_logger(out: Path, attempt: int) -> CSVLogger:
    """A resumed attempt logs its metrics beside the first one's (resume-N/metrics.csv), never over them."""
    return CSVLogger(str(out), name="", version=f"resume-{attempt}" if attempt else "")


def make_wandb_logger(cfg: ExperimentConfig, out: Path, extra: dict) -> WandbLogger | None:
    lc = cfg.logging
    if not lc.wandb or lc.mode == "disabled":
        return None
    os.environ.setdefault("WANDB_SILENT", "true")

    def logger(mode: str) -> WandbLogger:
        return WandbLogger(
            project=lc.project, entity=lc.entity, group=lc.group, name=lc.name or out.name, tags=list(lc.tags),
            save_dir=str(out), mode=mode, config={**flatten(to_dict(cfg)), **extra}, log_model=False,
        )

    if lc.mode != "online":
        return logger(lc.mode)
    online = logger("online")
    try:
        online.experiment  # connect now rather than inside fit(): training must never die because logging did
        return online
    except Exception as e:  # unreachable server, bad or missing key, quota...
        first = redact(str(e).splitlines()[0] if str(e) else "")[:200]
        log.warning("W&B is unreachable or misconfigured (%s: %s); logging offline under %s, upload later with "
                    "`wandb sync`", type(e).__name__, first, out)
        return logger("offline")
