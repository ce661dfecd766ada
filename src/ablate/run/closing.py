"""The lines `ablate train` ends with: how the run ended, the scores of the weights it reports, and where its files
are, read from the summary it wrote (summary.json holds all of it)."""

from __future__ import annotations

import math
import os
from pathlib import Path

from ablate.run.progress_file import format_duration

SHOWN = (("val/bleu", "val/bleu {:.2f}"), ("val/ppl", "val/ppl {:.2f}"), ("val/loss", "val/loss {:.3f}"))
FILES = ("summary.json", "metrics.csv", "config.yaml", "checkpoints", "eval", "wandb")


def shown_path(path: str | Path) -> str:
    """`path` relative to the working directory when it lies below it (runs/qs, as the user typed it), else as is."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def closing_lines(summary: dict) -> list[str]:
    out_dir = Path(summary["out_dir"])
    ended = f"done: {summary.get('steps', '?')} steps ({summary.get('stop_reason', 'finished')})"
    if summary.get("wall_seconds") is not None:
        ended += f" in {format_duration(summary['wall_seconds'])}"
    last = summary.get("last", {})
    scores = [fmt.format(last[key]) for key, fmt in SHOWN if isinstance(last.get(key), (int, float)) and math.isfinite(last[key])]
    lines = [ended]
    if scores:
        weights = summary.get("selected", "final weights")
        n, total = summary.get("val/bleu_sentences"), summary.get("val/sentences")
        sample = f" (BLEU on {n} of {total} sentences)" if "val/bleu" in last and n and total and n < total else ""
        lines.append(f"{weights}: {', '.join(scores)}{sample}")
    files = []
    for name in FILES:
        path = out_dir / name
        if path.is_dir():
            inside = sorted(os.listdir(path))
            shown = ", ".join(inside) if name == "checkpoints" and len(inside) <= 4 else None
            files.append(f"{name}/" + (f" ({shown})" if shown else ""))
        elif path.is_file():
            files.append(name)
    lines.append(f"outputs in {shown_path(out_dir)}/: " + ", ".join(files))
    return lines


def print_closing(summary: dict) -> None:
    """The closing lines on stdout, from global rank 0 only (every DDP rank returns the summary)."""
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    if getattr(rank_zero_only, "rank", 0) == 0:
        print("\n".join(closing_lines(summary)), flush=True)
