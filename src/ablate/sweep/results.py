"""A study's trials as a results table: results.csv / results.json in the sweep's out_dir, the printed table,
and a W&B Table in a `NAME-summary` run of the study's group."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState
from rich.console import Console
from rich.table import Table

from ablate.atomic import write_file
from ablate.sweep.ledger import failed_by_itself, is_bookkeeping, row_of
from ablate.sweep.spec import Sweep

_RAN = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
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


def failed_rows(study: optuna.Study) -> tuple[list[FrozenTrial], bool]:
    """The last trial of each row left failed by its own fault (a crash, a NaN, a bad override), and whether no row
    finished at all. A row that failed and then finished on a rerun, or whose trial was stopped by a signal or died with
    its worker (it continues on the next run), is not failed; bookkeeping claims are no row. A search trial is its own
    row."""
    last: dict = {}
    finished = set()
    for t in study.get_trials(deepcopy=False):
        if t.state in (TrialState.WAITING, TrialState.RUNNING) or is_bookkeeping(t):
            continue
        key = row_of(t) or t.number
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            finished.add(key)
        if key not in last or t.number > last[key].number:
            last[key] = t
    failed = [t for key, t in last.items() if key not in finished and failed_by_itself(t)]
    return failed, bool(failed) and not finished


def where_logged(t: FrozenTrial) -> str:
    """Where a trial's output is: its process writes stdout and stderr to RUN_DIR/train.log (ablate.sweep.trial)."""
    if "out_dir" not in t.user_attrs:
        return "no log: it failed before its run directory was made"
    return f"log: {Path(t.user_attrs['out_dir']) / 'train.log'}"


def report_failures(study: optuna.Study) -> bool:
    """Name each failed row, why and where its log is, on stderr (whole lines, for logs and CI): an error when no row
    finished, else a warning. Returns whether no row finished (the sweep then exits 1)."""
    failed, none_finished = failed_rows(study)
    if not failed:
        return False
    rows = len({row_of(t) or t.number for t in study.get_trials(deepcopy=False, states=_RAN) if not is_bookkeeping(t)})
    if not none_finished:
        head = f"warning: {len(failed)} of {rows} rows failed (the others have results)"
    elif len(failed) == rows:
        head = f"error: every trial failed ({rows} row{'s' * (rows > 1)}; nothing to compare)"
    else:  # the rest were stopped or died with their workers, and continue on the next run
        head = f"error: no row finished: {len(failed)} of {rows} rows failed, the others were stopped"
    lines = [f"ablate sweep: {head}:"]
    for t in failed:
        name = t.user_attrs.get("name") or (row_of(t) or (f"trial{t.number}",))[0]
        lines.append(f"  {name}: trial {t.number}, {t.user_attrs.get('fail_reason', '')[:300]}; {where_logged(t)}")
    print("\n".join(lines), file=sys.stderr, flush=True)
    return none_finished


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
