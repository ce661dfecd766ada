"""Finished runs for `ablate table`: from a sweep's trial directories (config.yaml + summary.json) or from W&B
offline run files, so runs synced from elsewhere tabulate too."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ablate.config import ModelConfig, flatten
from ablate.config.saved import read_run_config
from ablate.config.trained import trained_differences
from ablate.files.json_file import read_json
from ablate.run.exits import PRUNED
from ablate.run.summary_fields import check_summary


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
    improving: float | None = None  # how much val/ppl improved over the convergence rule's last window (a fraction)
    source: str = ""  # the run directory or W&B run file, to name the run in messages
    run_dir: Path | None = None  # None for a W&B run: its per-sentence scores travel in `summary`
    summary: dict = field(default_factory=dict)


def effective_config(config: dict) -> dict:
    """d_k/d_v default to d_model/heads: make them explicit so rows compare by value, as the paper prints them."""
    c = dict(config)
    if c.get("model.d_model") and c.get("model.heads"):
        m = ModelConfig(d_model=c["model.d_model"], heads=c["model.heads"], d_k=c.get("model.d_k"), d_v=c.get("model.d_v"))
        c["model.d_k"], c["model.d_v"] = m.head_dims
    if c.get("model.enc_layers") != c.get("model.dec_layers"):
        c["model.enc_layers"] = f"{c.get('model.enc_layers')}+{c.get('model.dec_layers')}"
    return c


def _run(row, config: dict, summary, source: str, run_dir: Path | None = None) -> Run:
    check_summary(summary, source)
    last = summary.get("last") or {}
    params = summary.get("params")
    params = params.get("total") if isinstance(params, dict) else params
    if params is None:
        params = summary.get("params/total")

    def number(key: str, v):
        """`v`, the summary's `key`: None, or a finite number >= 0; anything else is an error naming the run and key."""
        if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0):
            return v
        raise ValueError(f"{source}: summary key '{key}' should be a finite number >= 0, got {v!r}")

    stop = summary.get("stop_reason")
    if stop is not None and not isinstance(stop, str):
        raise ValueError(f"{source}: summary key 'stop_reason' should be a string, got {stop!r}")
    convergence = summary.get("convergence")
    improving = convergence.get("improvement") if isinstance(convergence, dict) else None
    if improving is not None and not (isinstance(improving, (int, float)) and not isinstance(improving, bool) and math.isfinite(improving)):
        raise ValueError(f"{source}: summary key 'convergence.improvement' should be a finite number, got {improving!r}")
    return Run(
        row=str(row),
        config=effective_config(config),
        ppl=number("val/ppl", last.get("val/ppl", summary.get("val/ppl"))),
        bleu=number("val/bleu", last.get("val/bleu", summary.get("val/bleu"))),
        params=number("params", params),
        tokens_per_s=number("speed/tokens_per_s", summary.get("speed/tokens_per_s")),
        step_ms=number("speed/step_ms", summary.get("speed/step_ms")),
        long_bleu=number("val_long/bleu", summary.get("val_long/bleu")),
        steps=number("steps", summary.get("steps")),
        epochs=number("epochs", summary.get("epochs")),
        flops=number("flops", summary.get("flops")),
        wall_seconds=number("wall_seconds", summary.get("wall_seconds")),
        stop_reason=stop,
        improving=improving,
        source=source,
        run_dir=run_dir,
        summary=summary,
    )


def runs_from_dirs(root: Path) -> list[Run]:
    """Every run under `root` (a sweep's out_dir or any folder of run dirs) with its config.yaml + summary.json, those
    a sweep's pruner stopped early included (`unpruned`)."""
    runs = []
    for summary_path in sorted(root.rglob("summary.json")):
        config_path = summary_path.parent / "config.yaml"
        if not config_path.exists():  # a damaged run: leaving it out would quietly drop a seed
            raise ValueError(
                f"{summary_path.parent}: a finished run (summary.json) without its config.yaml, so its row and "
                "configuration are unknown; restore config.yaml, or move the run out of the study"
            )
        config = flatten(read_run_config(config_path, whole=True))
        row = config.get("sweep.row") or row_of_folder(summary_path.parent, config)
        summary = read_json(summary_path, "run summary")
        runs.append(_run(row, config, summary, str(summary_path.parent), summary_path.parent))
    return runs


def unpruned(runs: list[Run]) -> tuple[list[Run], dict[str, str]]:
    """The runs less those a sweep's pruner stopped early, and those -> why they are left out. A pruned run wrote its
    summary.json, but it is no finished seed: a table of its final scores would test a 10-step run against a 40-step
    base. (`--at-update N` keeps it where it got to N: its curve there is as any other run's.)"""
    kept = [r for r in runs if r.stop_reason != PRUNED]
    return kept, {
        r.source: f"pruned at step {r.steps}: the sweep's pruner stopped it early, so it is no finished seed"
        for r in runs
        if r.stop_reason == PRUNED
    }


def row_of_folder(run: Path, config: dict) -> str:
    """The row of a run outside a sweep: its folder's name; for a member of `ablate train --members` (folders
    GROUP/seed=S[,KEY=V]) the group's, so a group of seeds is one row of them, and members that differ in a listed value
    are rows of their own (GROUP,KEY=V). The group is named by the folder the member sits in, not the one it trained
    in: a group moved aside (`--move-aside`, GROUP.earlier-1; its members' configs still name GROUP) is a row of its
    own, not more seeds of the group trained after it, in the study and in its archive alike."""
    if (config.get("members.size") or 1) > 1 and config.get("members.group"):
        apart = [part for part in run.name.split(",") if not part.startswith("seed=")]
        return ",".join([run.resolve().parent.name, *apart])
    return run.name


def check_rows(runs: list[Run]) -> None:
    """A row's runs must be its seeds of one configuration: a run copied twice would count as another seed and
    narrow every interval, and a seed trained otherwise would be averaged in unseen. Raises ValueError naming both."""
    first: dict[str, Run] = {}
    seen: dict[tuple[str, object], Run] = {}
    for run in runs:
        twin = seen.setdefault((run.row, run.config.get("seed")), run)
        if twin is not run:
            raise ValueError(
                f"row '{run.row}' has two runs of seed {run.config.get('seed')}: {twin.source} and {run.source}; move one out of the study"
            )
        ref = first.setdefault(run.row, run)
        if diff := trained_differences(ref.config, run.config):
            raise ValueError(
                f"row '{run.row}' mixes configurations: {ref.source} and {run.source} differ in "
                + ", ".join(f"{k} ({ours!r} vs {theirs!r})" for k, (ours, theirs) in diff.items())
                + "; a row's runs may differ only in their seed"
            )


def runs_from_wandb(root: Path) -> tuple[list[Run], dict[str, str]]:
    """Every finished W&B offline run under `root`, and the run files left out -> why: a run W&B has not closed yet
    (its records reach the file only then), one that finished without final scores, a sweep's summary-table run (by
    its job type: a tag is the user's to choose), an earlier offline copy of a run resumed under the same id."""
    from ablate.evaluation.wandb_records import read_records
    from ablate.files.wandb_offline import find_runs, latest_of_each, read_run
    from ablate.sweep.wandb_summary import SUMMARY_JOB_TYPE

    runs, skipped, trials = [], {}, []
    for run in map(read_run, find_runs(root)):
        if run.job_type == SUMMARY_JOB_TYPE:
            skipped[str(run.path)] = "a sweep's summary table, not a trial"
        else:
            trials.append(run)
    found, earlier = latest_of_each(trials)
    for path, later in earlier.items():
        skipped[str(path)] = f"an earlier copy of W&B run {later.run_id}; its latest, {later.path}, is read"
    for run in found:
        if run.exit_code is None:
            skipped[str(run.path)] = UNFINISHED
        elif "val/bleu" not in run.summary and "last" not in run.summary:
            skipped[str(run.path)] = "finished without final scores (no val/bleu or last in its summary): failed or stopped before them"
        else:
            row = run.config.get("sweep.row") or _row_of_wandb_run(run)
            runs.append(_run(row, run.config, read_records(run.summary, run.files, str(run.path)), str(run.path)))
    return runs, skipped


def _row_of_wandb_run(run) -> str:
    """A run outside a sweep is the row its W&B name says, but a member's name is GROUP/seed=S: its row is its group's,
    found from the folder its offline run lies in (MEMBER/wandb/offline-run-*/run-ID.wandb), as the run folders' table
    finds it."""
    if (run.config.get("members.size") or 1) > 1 and run.config.get("members.group"):
        for folder in run.path.parents:
            if folder.name == "wandb":
                return row_of_folder(folder.parent, run.config)
    return run.name


UNFINISHED = "not finished: no exit record (still running, or W&B stopped before closing its file)"


def require_base(rows: Iterable[str], among: str = "runs", left: str = "") -> None:
    """Refuse a table without a 'base' row, which every row is compared with, naming the rows there are (`among` what)
    and `left`, what was left out (a base trial killed or pruned is why, more often than not)."""
    names = sorted(set(rows))
    if "base" not in names:
        raise ValueError(
            f"no 'base' row among the {among} ({names}): every row is compared with it{left}; a sweep names its rows "
            "(variants: base: {}), a folder of runs by each run folder's name"
        )


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
        if not chosen:
            raise ValueError(f"--seeds: no run has seed {seeds}")
        for row in dict.fromkeys([*(rows or []), *(["base"] if any(r.row == "base" for r in runs) else [])]):
            if not any(r.row == row for r in chosen):
                have = sorted(str(r.config.get("seed")) for r in runs if r.row == row)
                raise ValueError(f"--seeds: row '{row}' has no run with seed {seeds} (its seeds: {', '.join(have)})")
        runs = chosen
    return runs
