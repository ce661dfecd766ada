"""A study's results as a W&B Table in its one summary run (job type `sweep-summary`, in the study's group), whose id is
the same for the same study in the same storage, so each sweep run updates that run rather than adding another.
"""

from __future__ import annotations

import hashlib
import os
import re

from ablate.sweep.results_files import COLUMNS
from ablate.sweep.spec import Sweep, safe_name
from ablate.sweep.storage import storage_url

SUMMARY_JOB_TYPE = "sweep-summary"  # how `ablate table --wandb` tells the study's summary run from its trials


def summary_run_id(sweep: Sweep, url: str) -> str:
    """The W&B run id of the study's summary run: the same for the same study name in the same storage (a password
    left out), so a sweep run again updates that run (resume="allow") rather than adding another."""
    digest = hashlib.sha256(f"{sweep.name}\n{_without_password(url)}".encode()).hexdigest()[:12]
    return f"{safe_name(sweep.name)[:40]}-summary-{digest}"


def _without_password(url: str) -> str:
    """`url` with its password dropped, the userinfo's and a `password=` query value's: hashed, a password is open to
    guessing offline from the run id, and a new one would start another summary run. The userinfo's runs to its last
    '@' (as ablate.messages.redact reads it: a '/' or ':' in it does not end it early); a user name holds none of
    ':/@', so a path's '@' is left alone. A URL that held a plain password hashes as it always did (`user@host/db`)."""
    scheme, sep, rest = url.partition("://")
    rest = re.sub(r"^([^:/@]*):[\s\S]*@", r"\1@", rest)
    base, query_sep, query = rest.partition("?")
    kept = [p for p in query.split("&") if not p.lower().startswith("password=")] if query_sep else []
    return f"{scheme}{sep}{base}{'?' * bool(kept)}{'&'.join(kept)}"


def log_wandb_table(sweep: Sweep, rows: list[dict], url: str | None = None) -> None:
    """The study's summary as a W&B Table in its one summary run, in the study's group (offline unless configured).
    Offline, each update is a new offline-run directory of the same run id (W&B cannot append to a closed run file):
    `wandb sync` sends each to that one run, and readers take the latest (ablate.files.wandb_offline.latest_of_each).
    `url`: the study's storage (default: the sweep file's, or SQLite in its out_dir)."""
    cfg = sweep.config_for({})
    if not cfg.logging.wandb or cfg.logging.mode == "disabled":
        return
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    run = wandb.init(
        project=cfg.logging.project,
        entity=cfg.logging.entity,
        group=sweep.name,
        name=f"{sweep.name}-summary",
        id=summary_run_id(sweep, url or storage_url(sweep.out_dir, sweep.storage)),
        resume="allow",
        job_type=SUMMARY_JOB_TYPE,
        dir=str(sweep.out_dir),
        mode=cfg.logging.mode,
        tags=list(dict.fromkeys([*cfg.logging.tags, "summary"])),
    )
    try:
        run.log({"trials": wandb.Table(columns=COLUMNS, data=[[r[c] for c in COLUMNS] for r in rows])})
    finally:
        run.finish()
