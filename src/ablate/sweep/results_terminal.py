"""A study's results table printed at the end of `ablate sweep`: a rich table of its trials, the lines that say what its
scores and objective are on, and each failed trial's reason.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


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
