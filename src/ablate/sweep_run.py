"""`ablate sweep FILE`: plan (--dry-run), run N workers on one study, and summarise it (table, CSV, W&B Table)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys

import optuna
from optuna.trial import TrialState
from rich.console import Console
from rich.table import Table

from ablate.journal import journal_path
from ablate.study import STORAGE_ENV, enqueue_rows, open_study, redact, run_worker, storage_url
from ablate.sweep import Sweep, diff_from_base, load_sweep

SUMMARY_COLUMNS = ["number", "name", "state", "value", "val/bleu", "val/ppl", "params", "speed/tokens_per_s", "speed/step_ms",
                   "wall_seconds", "out_dir", "fail_reason"]


def dry_run(sweep: Sweep, console: Console) -> None:
    console.print(f"[bold]{sweep.name}[/]: {sweep.mode}, base {sweep.base}, objective "
                  f"{sweep.objective.direction} {' + '.join(f'{w:g}*{m}' for m, w in sweep.objective.terms.items())}")
    if sweep.overrides:
        console.print("every trial: " + ", ".join(f"{k}={v}" for k, v in sweep.overrides.items()))
    if sweep.mode == "variants":
        table = Table("row", "seed", "differences from the base config")
        for row, seed in sweep.rows():
            diff = diff_from_base(sweep, sweep.config_for(sweep.variants[row], seed))
            table.add_row(row, "-" if seed is None else str(seed), ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in diff.items()) or "(base)")
        console.print(table)
        console.print(f"{len(sweep.rows())} trials")
    else:
        table = Table("parameter", "distribution")
        for key, spec in sweep.search.items():
            dist = spec["choices"] if spec["type"] == "categorical" else f"{spec['type']} [{spec['low']}, {spec['high']}]{' log' if spec.get('log') else ''}"
            table.add_row(key, str(dist))
        console.print(table)
        console.print(f"sampler {sweep.sampler}, pruner {sweep.pruner}, n_trials {sweep.n_trials}, timeout {sweep.timeout}")


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


def launch_workers(sweep: Sweep, url: str, workers: int) -> list[int]:
    """N worker processes on one study; with GPUs each sees only its own device(s)."""
    gpus, per = _gpu_count(), sweep.gpus_per_trial
    # Devices as this process sees them: indices into an inherited CUDA_VISIBLE_DEVICES (e.g. a SLURM allocation).
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d] or [str(g) for g in range(gpus)]
    if gpus and workers * per > len(visible):
        raise ValueError(f"{workers} workers x gpus_per_trial {per} need {workers * per} GPUs, but {len(visible)} are visible")
    procs = []
    for i in range(workers):
        env = {**os.environ, STORAGE_ENV: url}  # the URL (it may hold a password) travels by environment, not argv
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(visible[i * per : (i + 1) * per])
        cmd = [sys.executable, "-m", "ablate.sweep_run", "worker", str(sweep.path), str(i), str(sweep.n_trials or 0)]
        procs.append(subprocess.Popen(cmd, env=env))

    def forward(signum, frame):  # a preempted sweep job: every worker passes it on to its trial and stops
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGUSR1):
        signal.signal(signum, forward)
    return [p.wait() for p in procs]


def summarize(sweep: Sweep, study: optuna.Study) -> list[dict]:
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.WAITING:
            continue
        row = {"number": t.number, "state": t.state.name, "value": t.value, **{k: t.user_attrs.get(k) for k in SUMMARY_COLUMNS[4:]}}
        row["name"] = t.user_attrs.get("name", "")
        rows.append({k: row.get(k) for k in SUMMARY_COLUMNS})
    with open(sweep.out_dir / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (sweep.out_dir / "results.json").write_text(json.dumps(rows, indent=2))
    return rows


def print_summary(rows: list[dict], console: Console) -> None:
    table = Table(*["#", "name", "state", "objective", "BLEU", "PPL", "params", "tok/s", "wall s"], title="trials")
    fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        table.add_row(str(r["number"]), r["name"], r["state"], fmt(r["value"], ".2f"), fmt(r["val/bleu"], ".2f"), fmt(r["val/ppl"], ".2f"),
                      fmt(r["params"], ","), fmt(r["speed/tokens_per_s"], ".0f"), fmt(r["wall_seconds"], ".0f"))
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
    run = wandb.init(project=cfg.logging.project, entity=cfg.logging.entity, group=sweep.name, name=f"{sweep.name}-summary",
                     job_type="sweep-summary", dir=str(sweep.out_dir), mode=cfg.logging.mode, tags=["summary"])
    try:
        run.log({"trials": wandb.Table(columns=SUMMARY_COLUMNS, data=[[r[c] for c in SUMMARY_COLUMNS] for r in rows])})
    finally:
        run.finish()


def sweep_cli(args: argparse.Namespace) -> int:
    console = Console(width=None if sys.stdout.isatty() else 160)  # logs and pipes get whole rows
    if args.storage:
        # W&B records the command line of the summary run; keep a password given by --storage out of it.
        sys.argv = [redact(a) for a in sys.argv]
    sweep = load_sweep(args.file)
    if args.n_trials:
        sweep.n_trials = args.n_trials
    if args.dry_run:
        dry_run(sweep, console)
        return 0
    url = storage_url(sweep, args.storage)
    sweep.out_dir.mkdir(parents=True, exist_ok=True)
    study = open_study(sweep, url)
    if sweep.mode == "variants":
        optuna.storages.fail_stale_trials(study)
        queued = enqueue_rows(study, sweep)
        done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
        console.print(f"study '{sweep.name}' at {redact(url)}: {done} trials finished, {queued} rows queued")
    workers = args.workers or (max(_gpu_count() // sweep.gpus_per_trial, 1) if _gpu_count() else sweep.workers)
    if workers == 1:
        run_worker(sweep, url, 0)
    else:
        codes = launch_workers(sweep, url, workers)
        if any(codes):
            console.print(f"[yellow]worker exit codes: {codes}[/]")
    rows = summarize(sweep, study)
    print_summary(rows, console)
    log_wandb_table(sweep, rows)
    console.print(f"results: {sweep.out_dir / 'results.csv'}; dashboard: optuna-dashboard {journal_path(url) or redact(url)}")
    return 0


if __name__ == "__main__":
    # Worker process: python -m ablate.sweep_run worker SWEEP_FILE INDEX N_TRIALS (storage URL from the environment).
    _, _, path, index, n_trials = sys.argv
    worker_sweep = load_sweep(path)
    worker_sweep.n_trials = int(n_trials) or worker_sweep.n_trials
    run_worker(worker_sweep, os.environ[STORAGE_ENV], int(index))
