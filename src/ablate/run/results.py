"""What a finished run leaves as its results: summary.json completed with the weights it reports (ablate.run.evaluation),
the sentences they were scored on, the comparison basis and its evaluation record, and the same summary in W&B.
One recipe for a run (`ablate train`) and for each member of a group (ablate.run.members), so a member's summary is
a run's, key for key."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import lightning as L

from ablate.config import ExperimentConfig, to_dict
from ablate.data.module import TranslationDataModule
from ablate.evaluation.wandb_records import log_record
from ablate.files.atomic import write_file
from ablate.messages.redact import redact
from ablate.run.basis import comparison_basis
from ablate.run.evaluation import eval_long, scored_on, write_record
from ablate.training.module import TranslationModule

log = logging.getLogger(__name__)


def complete_summary(
    cfg: ExperimentConfig,
    summary: dict,
    judge: L.Trainer,
    module: TranslationModule,
    dm: TranslationDataModule,
    out: Path,
    selected: dict,
    validated: bool,
    writer: bool = True,
) -> tuple[dict, dict | None]:
    """`summary` (steps, stop reason, speed, `last` metrics ...) with the `selected` weights (select_weights), what they
    were scored on and its basis, the longer sentences' figures and the evaluation record (written by `writer` only:
    rank 0 of a DDP run); returns (summary, record or None)."""
    summary = {**summary, **selected, **(scored_on(cfg, dm) if validated else {})}
    summary["basis"] = comparison_basis(cfg, len(selected.get("averaged_from", [])))  # fewer to average: says so
    summary["data"] = {"dropped": dm.dropped}
    if cfg.sweep.study:
        summary["sweep"] = to_dict(cfg)["sweep"]
    if writer and cfg.train.eval_longer_than:
        summary.update(eval_long(cfg, module, dm))
    record = None
    if writer and validated and cfg.train.eval_record:
        record = write_record(cfg, judge, module, dm, out, selected["selected"])
        summary["eval_record"] = "eval/valid.json"
        # With train.val_bleu off, the record is the only BLEU of the reported weights (on the same sentences val/bleu
        # would be): a sweep's val/bleu objective reads it from here.
        if "val/bleu" not in summary["last"]:
            summary["last"]["val/bleu"], summary["bleu_signature"] = record["bleu"], record["bleu_signature"]
    return summary, record


def publish(out: Path, summary: dict, record: dict | None, wandb_logger) -> None:
    """summary.json, then the summary and the record in the run's W&B run. W&B must never be the reason a run's
    results are lost or its command fails: summary.json is written first, and a W&B error is logged, not raised."""
    write_file(out / "summary.json", json.dumps(summary, indent=2))
    if wandb_logger is None:
        return
    try:
        wandb_logger.experiment.summary.update(summary)
        if record is not None:
            log_record(wandb_logger.experiment, record)
    except Exception as e:
        log.warning("%s: the summary did not reach W&B (%s: %s); summary.json holds it", out, type(e).__name__, redact(str(e)))
