"""A study's trials as a results table: results.csv / results.json in the sweep's out_dir, the printed table,
and a W&B Table in a `NAME-summary` run of the study's group."""

from __future__ import annotations

import csv
import io
import json
import os

import optuna
from optuna.trial import TrialState
from rich.console import Console
from rich.table import Table

from ablate.atomic import write_file
from ablate.sweep.spec import Sweep

COLUMNS = [
    "number",
    "name",
    "state",
    "value",
    "val/bleu",
    "val/ppl",
    "params",
    "speed/tokens_per_s",
    "speed/step_ms",
    "wall_seconds",
    "out_dir",
    "fail_reason",
]


def summarize(sweep: Sweep, study: optuna.Study) -> list[dict]:
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.WAITING:
            continue
        row = {
            "number": t.number,
            "state": t.state.name,
            "value": t.value,
            "name": t.user_attrs.get("name", ""),
            **{k: t.user_attrs.get(k) for k in COLUMNS[4:]},
        }
        rows.append({k: row.get(k) for k in COLUMNS})
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    write_file(sweep.out_dir / "results.csv", table.getvalue())  # whole or not at all, also on a full disk
    write_file(sweep.out_dir / "results.json", json.dumps(rows, indent=2))
    return rows


def print_summary(rows: list[dict], console: Console) -> None:
    table = Table(*["#", "name", "state", "objective", "BLEU", "PPL", "params", "tok/s", "wall s"], title="trials")

    def fmt(v, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    for r in rows:
        table.add_row(
            str(r["number"]),
            r["name"],
            r["state"],
            fmt(r["value"], ".2f"),
            fmt(r["val/bleu"], ".2f"),
            fmt(r["val/ppl"], ".2f"),
            fmt(r["params"], ","),
            fmt(r["speed/tokens_per_s"], ".0f"),
            fmt(r["wall_seconds"], ".0f"),
        )
    console.print(table)
    for r in rows:
        if r["state"] == "FAIL" and r["fail_reason"]:
            console.print(f"[red]trial {r['number']} {r['name']} failed:[/] {r['fail_reason']}")


def log_wandb_table(sweep: Sweep, rows: list[dict]) -> None:
    """The study's summary as a W&B Table in a run of the study's group (offline unless configured)."""
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
        job_type="sweep-summary",
        dir=str(sweep.out_dir),
        mode=cfg.logging.mode,
        tags=["summary"],
    )
    try:
        run.log({"trials": wandb.Table(columns=COLUMNS, data=[[r[c] for c in COLUMNS] for r in rows])})
    finally:
        run.finish()
