"""Where a run's metrics go: a CSV file per attempt in the run directory, and W&B (offline unless configured),
which must never be the reason a run dies."""

from __future__ import annotations

import csv
import io
import logging
import os
from pathlib import Path

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.core.saving import save_hparams_to_yaml
from lightning.pytorch.loggers import CSVLogger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from ablate.config import ExperimentConfig, flatten, to_dict
from ablate.files.atomic import append, replacing, write_file
from ablate.messages.redact import redact

log = logging.getLogger(__name__)


class _RunDirWriter(ExperimentWriter):
    """Lightning's CSV writer, minus its check that the log directory is empty. That check assumes the directory
    belongs to the logger, warns "Previous log files in this directory will be deleted" and deletes a metrics.csv
    it finds; the first attempt's log directory is the run directory itself, which already holds config.yaml (and
    checkpoints/, wandb/ once training starts). No earlier metrics.csv can be there: prepare_out_dir refuses (or
    moves aside) an earlier run, and each resumed attempt logs to a new resume-N/."""

    def _check_log_dir_exists(self) -> None:
        pass

    def save(self) -> None:
        """Lightning's save, whole lines or none: new rows are appended in one write (cut back on a full disk) and a
        new column rewrites the file atomically, so metrics.csv always ends on a complete line and keeps its rows.
        The header only changes once the file has it: rows held back by a failed save go out with the next one."""
        if not self.metrics:
            return
        keys = sorted(set(self.metrics_keys).union(*self.metrics))
        path = self.metrics_file_path
        if os.path.isfile(path) and keys != self.metrics_keys:
            with open(path, newline="") as f:
                old = list(csv.DictReader(f))
            write_file(path, _csv(keys, old + self.metrics, header=True))
        else:
            append(path, _csv(keys, self.metrics, header=not os.path.isfile(path)))
        self.metrics_keys, self.metrics = keys, []

    def log_hparams(self, params: dict) -> None:
        """Lightning's hparams.yaml, replaced whole (ablate.files.atomic)."""
        self.hparams.update(params)
        path = Path(self.log_dir) / self.NAME_HPARAMS_FILE
        with replacing(path) as tmp:
            save_hparams_to_yaml(tmp, self.hparams)


def _csv(keys: list[str], rows: list[dict], header: bool) -> str:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=keys)
    if header:
        writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


class RunCSVLogger(CSVLogger):
    """metrics.csv in the run directory (resume-N/metrics.csv for a resumed attempt), beside the run's other files."""

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _RunDirWriter(log_dir=self.log_dir)
        return self._experiment


def make_csv_logger(out: Path, attempt: int) -> CSVLogger:
    """A resumed attempt logs its metrics beside the first one's (resume-N/metrics.csv), never over them."""
    return RunCSVLogger(str(out), name="", version=f"resume-{attempt}" if attempt else "")


def make_wandb_logger(cfg: ExperimentConfig, out: Path, extra: dict, several: bool = False) -> WandbLogger | None:
    """The run's W&B logger: tags each once (W&B keeps a repeated one), job type "sweep-trial" for a trial of a study
    and "train" otherwise (a study's summary run is "sweep-summary", ablate.sweep.wandb_summary). `several`: one of the
    runs a member group logs from one process, each its own W&B run (wandb's reinit="create_new")."""
    lc = cfg.logging
    if not lc.wandb or lc.mode == "disabled":
        return None
    os.environ.setdefault("WANDB_SILENT", "true")

    earlier = earlier_wandb_id(out)

    def logger(mode: str) -> WandbLogger:
        made = WandbLogger(
            project=lc.project,
            entity=lc.entity,
            group=lc.group,
            name=lc.name or out.name,
            tags=list(dict.fromkeys(lc.tags)),
            job_type="sweep-trial" if cfg.sweep.study else "train",
            save_dir=str(out),
            mode=mode,
            config={**flatten(to_dict(cfg)), **extra},
            log_model=False,
            **({"reinit": "create_new"} if several else {}),
            **({"id": earlier, "resume": "allow"} if earlier else {}),
        )
        # Lightning hands wandb.init `anonymous=None` when not asked for it, and wandb >= 0.19 warns that "the
        # anonymous setting has no effect" whenever the key is present; leave it out unless it was set.
        if getattr(made, "_wandb_init", {}).get("anonymous", "") is None:
            del made._wandb_init["anonymous"]
        return made

    if lc.mode != "online":
        return logger(lc.mode)
    online = logger("online")
    try:
        _ = online.experiment  # connect now rather than inside fit(): training must never die because logging did
        return online
    except Exception as e:  # unreachable server, bad or missing key, quota...
        log.warning(
            "W&B is unreachable or misconfigured (%s: %s); logging offline under %s, upload later with `wandb sync`",
            type(e).__name__,
            _said(e),
            out,
        )
        return logger("offline")


def earlier_wandb_id(out: Path) -> str | None:
    """The W&B run id of this run's earlier attempt, which a resume (`--resume`, `--auto-resume`, a sweep's retry)
    continues rather than adding a second W&B run of the same row and seed (`ablate table --wandb` refused the folder,
    "two runs of seed 1"); offline, each attempt is a directory of its own under that id, as ablate.files.wandb_offline
    reads it. An earlier run moved aside took its wandb/ with it; None where there is none."""
    attempts = sorted((out / "wandb").glob("*run-*-*"), key=lambda d: d.name.split("run-", 1)[1])  # by start time
    names = [d.name.rsplit("-", 1)[1] for d in attempts if d.is_dir()]
    return names[-1] if names else None


def finish_wandb(logger: WandbLogger | None) -> None:
    """Close the W&B run `logger` started, if it started one. A run stopped before logging anything (a signal during
    setup, maybe while Lightning first imports wandb, which leaves a partly imported module a second import fails on)
    has none: nothing is imported or started here. A failure to close is a warning: it must not replace why the run
    ended (a Ctrl-C's exit 130) nor fail a finished run."""
    run = getattr(logger, "_experiment", None)  # WandbLogger.experiment would start a run to close it
    if run is None:
        return
    try:
        run.finish()
    except Exception as e:
        log.warning("W&B run not closed cleanly (%s: %s); its offline files may need `wandb sync`", type(e).__name__, _said(e))


def _said(e: Exception) -> str:
    """The first line of what a W&B error says, its secrets masked (a key or password it may quote)."""
    return redact(str(e).splitlines()[0] if str(e) else "")[:200]
