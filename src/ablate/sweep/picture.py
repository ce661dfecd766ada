"""The picture of a sweep (a snapshot, ablate.sweep.snapshot) drawn: for rich (a terminal), one line per trial, the
counts and the time left, the best row; or as plain lines (logs). `ablate sweep` shows it live (ablate.sweep.live),
`ablate status` once (ablate.sweep.status).
"""

from __future__ import annotations

from datetime import datetime

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ablate.run.progress_file import format_duration, format_eta
from ablate.sweep.snapshot import COUNTED, Snapshot, TrialView


def _f(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _step(v: TrialView) -> str:
    if v.step is None:
        return "-"
    return f"{v.step}/{v.total}" if v.total else str(v.step)


def counts_line(snap: Snapshot) -> str:
    """The counts, then how long the rest takes: "about" an estimate, "at most" a bound (see `time_left`)."""
    shown = [f"{k} {snap.counts.get(k, 0)}" for k in COUNTED if k not in ("interrupted", "waiting") or snap.counts.get(k)]
    if snap.left_s is None:
        return ", ".join(shown)
    left = f"; {'at most' if snap.left_bound else 'about'} {format_duration(snap.left_s)} left at {max(1, len(snap.running))} at a time"
    if snap.left_capped is not None:
        left += f" (a ≤ ETA counted at the finished trials' mean, {format_duration(snap.left_capped)})"
    return ", ".join(shown) + left


def best_line(snap: Snapshot) -> str:
    b = snap.best
    if b is None:
        return "best: none finished yet"
    extra = "".join(
        f", {k} {_f(x, spec)}" for k, x, spec in (("val/bleu", b.val_bleu, ".2f"), ("val/loss", b.val_loss, ".3f")) if x is not None
    )
    return f"best: {b.name} (trial {b.number}) objective {b.value:.4g}{extra}"


def render(snap: Snapshot, all_trials: bool = False) -> Group:
    """The rich picture: a table of the running trials (every trial with `all_trials`), the counts, the best row. A gpu
    column only when a shown trial ran on a GPU, so a CPU sweep's picture is unchanged."""
    shown = snap.trials if all_trials else snap.running
    gpus = any(v.gpu for v in shown)
    table = Table(
        "#",
        "row",
        "state",
        *(["gpu"] if gpus else []),
        "step",
        "epochs",
        "tok/s",
        "ETA",
        "val/loss",
        "val/bleu",
        "",
        box=None,
        pad_edge=False,
        header_style="bold",
        title=f"{snap.study}  {datetime.fromtimestamp(snap.taken):%H:%M:%S}",
        title_justify="left",
    )
    for v in shown:
        style = {"finished": "green", "pruned": "yellow", "failed": "red", "interrupted": "yellow", "continued": "dim"}.get(v.state, "")
        note = v.note if v.value is None else f"objective {v.value:.4g}" + (f"; {v.note}" if v.note else "")
        table.add_row(
            str(v.number),
            v.name,
            Text(v.state, style=style),
            *([v.gpu or "-"] if gpus else []),
            _step(v),
            _f(v.epochs, ".2f"),
            _f(v.tokens_per_s, ",.0f"),
            format_eta(v.eta_s, v.eta_upper),
            _f(v.val_loss, ".3f"),
            _f(v.val_bleu, ".2f"),
            note,
        )
    if not table.row_count:
        table.add_row("", Text("no trial running", style="dim"), *[""] * (len(table.columns) - 2))
    return Group(table, Text(counts_line(snap)), Text(best_line(snap), style="bold" if snap.best else "dim"))


def plain_trial(v: TrialView) -> str:
    parts = [f"trial {v.number} {v.name}: {v.state}", *([f"gpu {v.gpu}"] if v.gpu else []), f"step {_step(v)}"]
    if v.epochs is not None:
        parts.append(f"epochs {v.epochs:.2f}")
    parts += [
        f"{_f(v.tokens_per_s, ',.0f')} tok/s",
        f"ETA {format_eta(v.eta_s, v.eta_upper)}",
        f"val/loss {_f(v.val_loss, '.3f')}",
        f"val/bleu {_f(v.val_bleu, '.2f')}",
    ]
    if v.value is not None:
        parts.append(f"objective {v.value:.4g}")
    return ", ".join(parts) + (f" ({v.note})" if v.note else "")


def plain_summary(snap: Snapshot) -> str:
    return f"{snap.study}: {counts_line(snap)}; {best_line(snap)}"


def plain_lines(snap: Snapshot, all_trials: bool = False) -> list[str]:
    return [plain_trial(v) for v in (snap.trials if all_trials else snap.running)] + [plain_summary(snap)]
