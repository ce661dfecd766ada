"""Finished runs for `ablate table`: from a sweep's trial directories (config.yaml + summary.json) or from W&B
offline run files, so runs synced from elsewhere tabulate too."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ablate.config import ModelConfig, flatten


@dataclass
class Run:
    row: str
    config: dict  # flattened
    ppl: float | None
    bleu: float | None
    params: float | None
    tokens_per_s: float | None
    step_ms: float | None
    long_bleu: float | None = None  # BLEU on validation sentences longer than any trained on (train.eval_longer_than)
    # How much the run trained and why it stopped (summary.json; None in runs written before these were recorded).
    steps: float | None = None
    epochs: float | None = None
    flops: float | None = None
    wall_seconds: float | None = None
    stop_reason: str | None = None
    source: str = ""  # the run directory or W&B run file, to name the run in messages
    run_dir: Path | None = None  # None for a W&B run: its per-sentence scores travel in `summary`
    summary: dict = field(default_factory=dict)


def _effective(config: dict) -> dict:
    """d_k/d_v default to d_model/heads: make them explicit so rows compare by value, as the paper prints them."""
    c = dict(config)
    if c.get("model.d_model") and c.get("model.heads"):
        m = ModelConfig(d_model=c["model.d_model"], heads=c["model.heads"], d_k=c.get("model.d_k"), d_v=c.get("model.d_v"))
        c["model.d_k"], c["model.d_v"] = m.head_dims
    if c.get("model.enc_layers") != c.get("model.dec_layers"):
        c["model.enc_layers"] = f"{c.get('model.enc_layers')}+{c.get('model.dec_layers')}"
    return c


def _run(row: str, config: dict, summary: dict, source: str, run_dir: Path | None = None) -> Run:
    last = summary.get("last", {})
    params = summary.get("params")
    params = params.get("total") if isinstance(params, dict) else params
    if params is None:
        params = summary.get("params/total")
    return Run(
        row=row,
        config=_effective(config),
        ppl=last.get("val/ppl", summary.get("val/ppl")),
        bleu=last.get("val/bleu", summary.get("val/bleu")),
        params=params,
        tokens_per_s=summary.get("speed/tokens_per_s"),
        step_ms=summary.get("speed/step_ms"),
        long_bleu=summary.get("val_long/bleu"),
        steps=summary.get("steps"),
        epochs=summary.get("epochs"),
        flops=summary.get("flops"),
        wall_seconds=summary.get("wall_seconds"),
        stop_reason=summary.get("stop_reason"),
        source=source,
        run_dir=run_dir,
        summary=summary,
    )


def runs_from_dirs(root: Path) -> list[Run]:
    """Every finished run under `root` (a sweep's out_dir or any folder of run dirs): config.yaml + summary.json."""
    runs = []
    for summary_path in sorted(root.rglob("summary.json")):
        config_path = summary_path.parent / "config.yaml"
        if not config_path.exists():
            continue
        config = flatten(yaml.safe_load(config_path.read_text()))
        row = config.get("sweep.row") or summary_path.parent.name
        runs.append(_run(row, config, json.loads(summary_path.read_text()), str(summary_path.parent), summary_path.parent))
    return runs


def runs_from_wandb(root: Path) -> list[Run]:
    """Every W&B offline run under `root` with a final summary (sweep summary-table runs are skipped)."""
    from ablate.eval_wandb import read_records
    from ablate.wandb_offline import find_runs, read_run

    runs = []
    for path in find_runs(root):
        run = read_run(path)
        if "summary" in run.tags or "val/bleu" not in run.summary and "last" not in run.summary:
            continue
        row = run.config.get("sweep.row") or run.name
        runs.append(_run(row, run.config, read_records(run.summary, run.files, str(run.path)), str(run.path)))
    return runs


def select(runs: list[Run], rows: list[str] | None = None, seeds: list[int] | None = None) -> list[Run]:
    """The runs of `rows` with `seeds` (all when None): e.g. a longer-trained base against the base run of the same
    seed, without the other seeds' noise. A row, or a chosen row's seeds, matching no run is an error naming what
    there is."""
    if rows:
        known = sorted({r.row for r in runs})
        if missing := [r for r in rows if r not in known]:
            raise ValueError(f"--rows: no runs of {missing}; the study has the rows {known}")
        runs = [r for r in runs if r.row in rows]
    if seeds:
        chosen = [r for r in runs if r.config.get("seed") in seeds]
        for row in rows or []:
            if not any(r.row == row for r in chosen):
                have = sorted(str(r.config.get("seed")) for r in runs if r.row == row)
                raise ValueError(f"--seeds: row '{row}' has no run with seed {seeds} (its seeds: {', '.join(have)})")
        if not chosen:
            raise ValueError(f"--seeds: no run has seed {seeds}")
        runs = chosen
    return runs
