"""A training run's progress file, RUN_DIR/progress.json: written by the run (ablate.run.progress), read by a sweep's
live view and `ablate status` from other processes, often while the run writes it. Kept free of torch and Lightning
so `ablate status` starts at once.

Fields (rewritten atomically, at most every few seconds and at each validation):
    phase      "training" | "validating" | "finished" | "stopped"
    step, max_steps     optimizer steps done, and the run's total (min of train.max_steps and train.max_epochs' steps)
    epoch, max_epochs   current epoch (0-based), and the bound (null when only steps bound the run)
    epochs              epochs completed, a partial one as its fraction (as summary.json counts them; the live view's)
    tokens_per_s        target tokens per second of training over the last half minute (validation excluded)
    eta_s               seconds to the last step at that pace, validations included at the share of time they took so far
    eta_upper           true when a stopping rule (convergence, early stopping, a time or FLOPs budget) may end the run
                        sooner, so eta_s is an upper bound; shown as "≤1h02m"
    val/loss, val/bleu, val_step    the latest validation (null before the first) and the step it was taken at
    started, updated    Unix times
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ablate.files.atomic import write_file

PROGRESS_FILE = "progress.json"


NUMBERS = (
    "step",
    "max_steps",
    "epoch",
    "epochs",
    "max_epochs",
    "tokens_per_s",
    "eta_s",
    "val/loss",
    "val/bleu",
    "val_step",
    "started",
    "updated",
)


def read_progress(run_dir: str | Path) -> dict | None:
    """A run's progress.json, or None when it has none yet or it cannot be read: not JSON, not a mapping, or a field
    above not a number (or null), `phase` not a string. Its readers show a run's progress and skip what they cannot
    read (a file may be mid-replace on another file system), so damage hides the progress, never the study."""
    try:
        state = json.loads((Path(run_dir) / PROGRESS_FILE).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("phase", ""), str):
        return None
    if not all(_number_or_none(state.get(key)) for key in NUMBERS):
        return None
    return state


def _number_or_none(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def write_progress(run_dir: str | Path, state: dict) -> None:
    """Readers never see a half-written file, and a full disk leaves the last one (ablate.files.atomic)."""
    write_file(Path(run_dir) / PROGRESS_FILE, json.dumps(state))


def format_eta(seconds: float | None, upper: bool = False) -> str:
    """An ETA as format_duration, marked "≤" when the run may stop sooner (see eta_upper above)."""
    text = format_duration(seconds)
    return f"≤{text}" if upper and text != "-" and seconds else text


def format_duration(seconds: float | None) -> str:
    """1h02m, 3m05s, 42s; '-' when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = int(round(max(seconds, 0)))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
