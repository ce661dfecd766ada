"""A study's trials as a results table: results.csv / results.json in the sweep's out_dir, the printed table,
and a W&B Table in the study's one summary run (job type `sweep-summary`, in the study's group).

Each score says what it is on: a run's val/ppl is on the whole validation split and its val/bleu often on a sample
of it (train.val_max_sentences), while `ablate table` scores both on the runs' evaluation records; the `*_on`
columns and the lines under the printed table name the split and sentences, so where the two tables' numbers
differ, each says on which sentences."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import sys
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState
from rich.console import Console
from rich.table import Table

from ablate.files.atomic import write_file
from ablate.sweep.ledger import failed_by_itself, is_bookkeeping, row_of
from ablate.sweep.spec import Sweep, safe_name
from ablate.sweep.storage import storage_url

_RAN = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
COLUMNS = [
    "number",
    "name",
    "state",
    "value",
    "val/bleu",
    "val/ppl",
    "epochs",
    "params",
    "speed/tokens_per_s",
    "speed/step_ms",
    "wall_seconds",
    "out_dir",
    "fail_reason",
    "val/bleu_on",
    "val/ppl_on",
    "objective_on",
]
SUMMARY_JOB_TYPE = "sweep-summary"  # how `ablate table --wandb` tells the study's summary run from its trials
_FROM_ATTRS = ("val/bleu", "val/ppl", "params", "speed/tokens_per_s", "speed/step_ms", "wall_seconds", "out_dir", "fail_reason")
_SAMPLE = re.compile(r"random (\d+) of (\d+)(?: \(seed (\S+)\))?")  # ablate.evaluation.records.describe_subset's words


def sentences(split: str, subset: str, total: int | None = None) -> str:
    """ "valid split, all 1,014 sentences" or "valid split, 200 of 1,014 sentences (random, seed 0)", from a
    `subset` as ablate.evaluation.records.describe_subset words it ("all", "random 200 of 1014 (seed 0)")."""
    if subset == "all" and total:
        return f"{split} split, all {total:,} sentences"
    if m := _SAMPLE.fullmatch(subset):
        return f"{split} split, {int(m[1]):,} of {int(m[2]):,} sentences (random" + (f", seed {m[3]})" if m[3] else ")")
    return f"{split} split, {subset}"


def scored_on(summary: dict, run_dir: Path | None = None) -> dict[str, str | None]:
    """What a run summary's validation scores are on, per metric; None where it does not say (a run from before
    ablate recorded it). val/loss and val/ppl: the whole split; val/bleu: train.val_max_sentences of it, or with
    train.val_bleu off, the evaluation record's sentences (the same sample), whose `subset` says which."""
    split, total = summary.get("val/split"), summary.get("val/sentences")
    split = split if isinstance(split, str) else None
    whole = sentences(split, "all", total) if split and isinstance(total, int) else None
    subset = summary.get("val/bleu_subset") or _record_subset(summary, run_dir)
    bleu = sentences(split or "valid", subset, total) if isinstance(subset, str) else None
    return {"val/loss": whole, "val/ppl": whole, "val/bleu": bleu}


def _record_subset(summary: dict, run_dir: Path | None) -> str | None:
    record = summary.get("eval/valid")  # a W&B run's summary carries its record
    if not isinstance(record, dict) and run_dir is not None and isinstance(summary.get("eval_record"), str):
        record = _read(run_dir / summary["eval_record"])
    return record.get("subset") if isinstance(record, dict) else None


def objective_on(summary: dict, terms: dict[str, float]) -> str:
    """Where each term of the objective comes from, as ablate.sweep.trial.metric_value reads it: the best
    validation's value (the checkpoint monitor's, unless the weights are averaged), else the last validation's, else
    the run's summary; e.g. "val/bleu at the best validation"."""
    averaged = str(summary.get("selected", "")).startswith("avg")
    best, last = (summary.get(k) if isinstance(summary.get(k), dict) else {} for k in ("best", "last"))
    parts = []
    for name, weight in terms.items():
        if not averaged and best.get("metric") == name and best.get("value") is not None:
            where = f"{name} at the best validation"
        elif name in last:
            where = f"{name} at the last validation"
        else:
            where = f"{name} of the whole run"
        parts.append(where if weight == 1 else f"{weight:g} × {where}")
    return " + ".join(parts)


def _read(path: Path) -> dict:
    """A trial's summary.json (or record), {} where this machine cannot read it: the table then leaves those cells out."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def summarize(sweep: Sweep, study: optuna.Study) -> list[dict]:
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.WAITING:
            continue
        row = {"number": t.number, "state": t.state.name, "value": t.value, "name": t.user_attrs.get("name", "")}
        row |= {k: t.user_attrs.get(k) for k in _FROM_ATTRS}
        run_dir = Path(t.user_attrs["out_dir"]) if t.user_attrs.get("out_dir") else None
        summary = _read(run_dir / "summary.json") if run_dir else {}
        if summary:
            on = scored_on(summary, run_dir)
            epochs = summary.get("epochs")
            epochs = epochs if isinstance(epochs, (int, float)) and not isinstance(epochs, bool) else None
            row |= {"epochs": epochs, "val/bleu_on": on["val/bleu"], "val/ppl_on": on["val/ppl"]}
            row["objective_on"] = objective_on(summary, sweep.objective.terms)
        rows.append({k: row.get(k) for k in COLUMNS})
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    write_file(sweep.out_dir / "results.csv", table.getvalue())  # whole or not at all, also on a full disk
    write_file(sweep.out_dir / "results.json", json.dumps(rows, indent=2))
    return rows


def print_summary(rows: list[dict], console: Console) -> None:
    table = Table(*["#", "name", "state", "objective", "BLEU", "PPL", "epochs", "params", "tok/s", "wall s"], title="trials")

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
            fmt(r["epochs"], ".2f"),
            fmt(r["params"], ","),
            fmt(r["speed/tokens_per_s"], ".0f"),
            fmt(r["wall_seconds"], ".0f"),
        )
    console.print(table)
    for line in scores_lines(rows):
        console.print(line, markup=False, highlight=False)
    for r in rows:
        if r["state"] == "FAIL" and r["fail_reason"]:
            console.print(f"[red]trial {r['number']} {r['name']} failed:[/] {r['fail_reason']}")


def scores_lines(rows: list[dict]) -> list[str]:
    """What the table's BLEU, PPL and objective are on, each said once, naming the trials where they differ; epochs:
    completed, a partial one as its fraction."""
    shown = [r for r in rows if r["val/bleu"] is not None or r["val/ppl"] is not None or r["value"] is not None]
    if not shown:
        return []

    def said(key: str) -> str:
        by: dict[str, list[int]] = {}
        for r in shown:
            by.setdefault(r[key] or "not recorded", []).append(r["number"])
        if len(by) == 1:
            return next(iter(by))
        return "; ".join(f"{what} (trial{'s' * (len(n) > 1)} {', '.join(map(str, n))})" for what, n in by.items())

    return [
        f"BLEU: {said('val/bleu_on')}. PPL: {said('val/ppl_on')}. Both from each trial's last validation (summary.json's "
        "`last`, the weights the run reports); `ablate table` scores each run on its evaluation record where it has one, "
        "and says on which sentences.",
        f"Objective: {said('objective_on')}. Epochs: completed, a partial one as its fraction.",
    ]


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


def summary_run_id(sweep: Sweep, url: str) -> str:
    """The W&B run id of the study's summary run: the same for the same study name in the same storage (a password
    left out), so a sweep run again updates that run (resume="allow") rather than adding another."""
    where = re.sub(r"(://[^/@:]*):[^/@]*@", r"\1@", url)
    digest = hashlib.sha256(f"{sweep.name}\n{where}".encode()).hexdigest()[:12]
    return f"{safe_name(sweep.name)[:40]}-summary-{digest}"


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
