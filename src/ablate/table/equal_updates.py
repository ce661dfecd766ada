"""Rows against the base at equal updates, from the validation curves the runs logged (`ablate table --at-update N`).

A study whose stopping rule ends runs at different lengths compares each row where its runs stopped; when runs
that trained longer score better ("Training length within rows" under the table), part of every Δ is training
length. The curves every run logs (metrics.csv, and resume-N/metrics.csv for a resumed attempt, the later attempt
winning where they overlap) allow the comparison at equal steps afterwards, with no new training: each row's
metric after update N, from single checkpoints, against the base by Welch's t over seeds, Holm over the rows (the
controls, `base-…` rows, left out), and a verdict against the paper where the metric is one it printed. It says
what a row has learned by N updates, not where it ends, and holds no per-sentence test.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from scipy import stats as st

from ablate.paper import BASE_VARIANTS, TABLE3, row_group
from ablate.table import stats
from ablate.table.compare import build_rows
from ablate.table.load import Run

PAPER_METRICS = {"val/ppl": ("ppl", stats.PPL_TIE), "val/bleu": ("bleu", stats.BLEU_TIE)}


def curve(run_dir: Path, metric: str) -> dict[int, float]:
    """update -> value of `metric` in a run's metrics files; a value logged at step s was measured after update s + 1
    (Lightning counts steps from 0). A value that is not a finite number is an error naming its file and line."""
    values: dict[int, float] = {}
    for path in [run_dir / "metrics.csv", *sorted(run_dir.glob("resume-*/metrics.csv"), key=_attempt)]:
        if not path.exists():
            continue
        with path.open(newline="") as fh:
            for line, record in enumerate(csv.DictReader(fh), start=2):
                raw = record.get(metric)
                if raw in (None, ""):
                    continue
                try:
                    value, step = float(raw), int(float(record["step"]))
                except (KeyError, TypeError, ValueError):
                    raise ValueError(f"{path}, line {line}: {metric}={raw!r} at step {record.get('step')!r} is not a number") from None
                if not math.isfinite(value):
                    raise ValueError(f"{path}, line {line}: {metric}={raw} is not finite")
                values[step + 1] = value
    return values


def at_update(runs: list[Run], update: int, metric: str = "val/ppl") -> dict:
    """Per row, the runs' `metric` after `update`: mean, sd, seeds; for rows of 2+ such runs beside a base of 2+,
    Δ against the base with Welch's 95% interval, p, Holm over those rows, and the verdict against the paper."""
    if update < 1:
        raise ValueError(f"--at-update: expected an update number of at least 1, got {update}")
    if any(r.run_dir is None for r in runs):
        raise ValueError("--at-update reads the validation curves in run directories; W&B run files hold no metrics.csv")
    runs = [run for row in build_rows(runs) for run in row.runs]  # Table 3's order
    values: dict[str, list[float]] = {}
    reached: dict[str, tuple[int, int]] = {}  # row -> (runs that logged `metric` after `update`, runs)
    for run in runs:
        found = curve(run.run_dir, metric).get(update)
        values.setdefault(run.row, [])
        if found is not None:
            values[run.row].append(found)
        got, total = reached.get(run.row, (0, 0))
        reached[run.row] = (got + (found is not None), total + 1)
    if "base" not in values:
        raise ValueError(f"no base row among the runs (rows: {sorted(values)}): every row is compared with it")
    base = values["base"]
    paper = {p.name: p for p in TABLE3}
    attr, tie = PAPER_METRICS.get(metric, (None, 0.0))
    lines = []
    for row, xs in values.items():
        line = {"row": row, "runs": reached[row][1], "seeds": len(xs), **_spread(xs), "control": row_group(row) == BASE_VARIANTS}
        if row != "base" and not line["control"] and len(xs) >= 2 and len(base) >= 2:
            d = stats.welch_interval(xs, base)
            line |= {"delta": d.delta, "low": d.low, "high": d.high, "p": _p(d)}
        if attr and row in paper and row != "base":
            line["paper_delta"] = getattr(paper[row], attr) - getattr(paper["base"], attr)
        lines.append(line)
    tested = [ln for ln in lines if "p" in ln]
    for ln, p in zip(tested, stats.holm([ln["p"] for ln in tested])):
        ln["p_holm"] = p
        if "paper_delta" in ln:
            ln["verdict"] = stats.verdict(ln["delta"], p, ln["paper_delta"], tie, (ln["low"], ln["high"]))
    return {"metric": metric, "update": update, "base": _spread(base) | {"seeds": len(base)}, "rows": lines}


def to_markdown(result: dict) -> str:
    """The comparison as a Markdown table and the lines that say what it is."""
    out = [
        f"# {result['metric']} after update {result['update']:,}, against the base",
        "",
        "| row | seeds | mean | sd | Δ [95% CI] | p | p Holm | paper Δ | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for ln in result["rows"]:
        delta = f"{ln['delta']:+.2f} [{ln['low']:+.2f}, {ln['high']:+.2f}]" if "delta" in ln else ""
        paper = f"{ln['paper_delta']:+.2f}" if "paper_delta" in ln else ""
        verdict = "control" if ln["control"] else ln.get("verdict", "")
        seeds = f"{ln['seeds']}" + ("" if ln["seeds"] == ln["runs"] else f" of {ln['runs']}")
        mean = "-" if ln["mean"] is None else f"{ln['mean']:.2f}"
        sd = "-" if ln["sd"] is None else f"{ln['sd']:.2f}"
        out.append(
            f"| {ln['row']} | {seeds} | {mean} | {sd} | {delta} | {_p_text(ln.get('p'))} | {_p_text(ln.get('p_holm'))} | {paper} | {verdict} |"
        )
    short = [
        f"{ln['row']} ({ln['seeds']} of {ln['runs']})"
        for ln in result["rows"]
        if ln["seeds"] < 2 and ln["row"] != "base" and not ln["control"]
    ]
    out += [
        "",
        f"Single checkpoints after update {result['update']:,} (the runs' logged validation, not a last-K average); Δ: row "
        "minus base, Welch's 95% interval over seeds, two-sided p, Holm over the rows tested; controls (base-... rows) "
        "are not tested. Seeds: runs that logged the metric after that update, of the row's runs.",
    ]
    if result["base"]["seeds"] < 2:
        out.append(f"Not tested: the base has {result['base']['seeds']} run there, and a test needs 2 on each side.")
    elif short:
        out.append(f"Not tested, fewer than 2 runs got there: {', '.join(short)}.")
    return "\n".join(out) + "\n"


def _p_text(p: float | None) -> str:
    return "" if p is None else "< 0.001" if p < 0.001 else f"{p:.3f}"


def _spread(xs: list[float]) -> dict:
    if not xs:
        return {"mean": None, "sd": None}
    interval = stats.t_interval(xs)
    return {"mean": interval.mean, "sd": interval.sd}


def _p(d: stats.Difference) -> float:
    if d.se == 0.0:
        return 1.0 if d.delta == 0.0 else 0.0
    return float(2 * st.t.sf(abs(d.delta) / d.se, d.df))


def _attempt(path: Path) -> int:
    """resume-10 after resume-9."""
    suffix = path.parent.name.removeprefix("resume-")
    return int(suffix) if suffix.isdigit() else 0
