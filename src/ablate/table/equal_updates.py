"""Rows against the base at equal updates, from the validation curves the runs logged (`ablate table --at-update N`).

A study whose stopping rule ends runs at different lengths compares each row where its runs stopped; when runs
that trained longer score better ("Training length within rows" under the table), part of every Δ is training
length. The curves every run logs (metrics.csv, and resume-N/metrics.csv for a resumed attempt; see `curve`) allow the comparison at equal steps afterwards, with no new training: each row's
metric after update N, from single checkpoints, against the base by Welch's t over seeds (a member group's seeds
once, by their mean: ablate.table.replicates), Holm over the rows (the
controls, `base-…` rows, left out), and a verdict against the paper where the metric is one it printed. It says
what a row has learned by N updates, not where it ends, and holds no per-sentence test.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from ablate.config.paper import BASE_VARIANTS, TABLE3
from ablate.table import paired_bootstrap, seed_intervals, verdicts
from ablate.table.compare import build_rows
from ablate.table.finished_runs import Run, require_base
from ablate.table.holm import holm
from ablate.table.replicates import group_of, replicate_index, replicate_means
from ablate.table.score_kinds import METRICS

PAPER_METRICS = {m.log_key: (key, m.tie) for key, m in METRICS.items()}  # a logged metric -> the paper's score, its tie


def curve(run_dir: Path, metric: str, last_update: float | None = None) -> dict[int, float]:
    """update -> value of `metric` over a run's attempts. A value logged at step s was measured after update s + 1
    (Lightning counts steps from 0); the evaluation of the final (averaged) weights, logged at the run's last step,
    and anything past `last_update` are not points of the curve. A resumed attempt restarts from a checkpoint, so
    what earlier attempts logged from its first point on was thrown away with their state and is dropped here."""
    values: dict[int, float] = {}
    for path in [run_dir / "metrics.csv", *sorted(run_dir.glob("resume-*/metrics.csv"), key=_attempt)]:
        if path.exists():
            attempt = _read(path, metric)
            if attempt:
                values = {u: v for u, v in values.items() if u < min(attempt)} | attempt
    return {u: v for u, v in values.items() if last_update is None or u <= last_update}


def _read(path: Path, metric: str) -> dict[int, float]:
    """One attempt's metrics.csv, as Lightning's CSV logger writes it: a header of names, then rows of as many cells,
    each empty or a number, and a line end at the end. Anything else (a file cut short, a cell that is not a number,
    a first row of numbers where the header was) is an error naming the file and line: read leniently, a damaged
    curve would pass for a run that logged no validation at that update."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a metrics file (invalid UTF-8 at byte {e.start})") from None
    if not text.endswith("\n"):
        raise ValueError(f"{path}: cut short (empty, or no line end after its last row); restore it or rerun the run")
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader)
    if any(_is_number(name) for name in header):
        raise ValueError(f"{path}, line 1: numbers where the header of column names should be")
    if metric in header and "step" not in header:
        raise ValueError(f"{path}: no 'step' column, so its {metric} values have no update to stand at")
    out: dict[int, float] = {}
    for cells in reader:
        where = f"{path}, line {reader.line_num}"
        if len(cells) != len(header):
            raise ValueError(f"{where}: {len(cells)} cells under a header of {len(header)}")
        record = dict(zip(header, cells))
        for name, raw in record.items():
            if raw and not _is_number(raw):
                raise ValueError(f"{where}: {name}={raw!r} is not a number")
        raw = record.get(metric)
        if not raw:
            continue
        value, step = float(raw), float(record["step"] or "nan")
        if not (math.isfinite(value) and math.isfinite(step) and step >= 0):
            raise ValueError(f"{where}: {metric}={raw} at step {record['step']!r} is not a finite number at an update")
        out[int(step) + 1] = value
    return out


def _is_number(text: str) -> bool:
    """A cell Lightning could have written: a float's text, where inf and nan are spelled out (a number in digits
    too large for a float, 1e999, was never written by a float)."""
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) or text.strip().lower().lstrip("+-") in ("inf", "infinity", "nan")


def at_update(runs: list[Run], update: int, metric: str = "val/ppl") -> dict:
    """Per row, the runs' `metric` after `update`: mean, sd, the seeds there and those that stopped before; for rows
    of 2+ such runs beside a base of 2+, Δ against the base with Welch's 95% interval, p, Holm over those rows; and
    the verdict against the paper (inconclusive where untested), as `ablate table` gives it."""
    if update < 1:
        raise ValueError(f"--at-update: expected an update number of at least 1, got {update}")
    if not metric.startswith("val/"):
        raise ValueError(f"--metric: expected a validation metric (val/ppl, val/bleu, val/loss), got {metric!r}")
    if any(r.run_dir is None for r in runs):
        raise ValueError("--at-update reads the validation curves in run directories; W&B run files hold no metrics.csv")
    rows = build_rows(runs)  # Table 3's order
    rows_by_name = {row.name: row for row in rows}
    curves = {id(run): curve(run.run_dir, metric, run.steps) for row in rows for run in row.runs}
    _check_logged(rows, curves, update, metric)
    paper_base = next(p for p in TABLE3 if p.name == "base")
    attr, tie = PAPER_METRICS.get(metric, (None, 0.0))
    lines = []
    for row in rows:
        there = [r for r in row.runs if update in curves[id(r)]]
        xs = replicate_means(np.array([curves[id(r)][update] for r in there]), replicate_index(there)).tolist()
        line = {
            "row": row.name,
            "runs": len(row.runs),
            "seeds": len(there),
            "replicates": len(xs),  # the seeds there, a member group's counted once
            "grouped": any(group_of(r) for r in there),
            "seeds_there": sorted(r.config.get("seed") for r in there if r.config.get("seed") is not None),
            "stopped_before": sorted(
                r.config.get("seed") for r in row.runs if r.steps is not None and r.steps < update and r.config.get("seed") is not None
            ),
            "control": row.group == BASE_VARIANTS,
            **({"unlike_paper": row.unlike_paper} if row.unlike_paper else {}),
            **_spread(xs),
        }
        lines.append(line | {"values": xs})
    require_base(ln["row"] for ln in lines)
    base = next(ln for ln in lines if ln["row"] == "base")
    for ln in lines:
        if ln is not base and not ln["control"] and ln["replicates"] >= 2 and base["replicates"] >= 2:
            d = seed_intervals.welch_interval(ln["values"], base["values"])
            ln |= {"delta": d.delta, "low": d.low, "high": d.high}
            if d.se > 0:  # every run of both rows alike (se 0): no variance, so no test rather than a p of 0 or 1
                ln["p"] = paired_bootstrap.two_sided_p(d.delta, d.se, d.df)
        if attr and (paper := rows_by_name[ln["row"]].paper) and ln is not base:  # by name, unless it varies otherwise
            digits = METRICS[attr].digits  # the paper's printed precision, as the table has it
            ln["paper_delta"] = round(getattr(paper, attr) - getattr(paper_base, attr), digits)
    tested = [ln for ln in lines if "p" in ln]
    for ln, p in zip(tested, holm([ln["p"] for ln in tested])):
        ln["p_holm"] = p
    for ln in lines:
        if "paper_delta" in ln and not ln["control"]:
            interval = (ln["low"], ln["high"]) if "p" in ln else None
            ln["verdict"] = verdicts.verdict(ln.get("delta"), ln.get("p_holm"), ln["paper_delta"], tie, interval)
        del ln["values"]
    return {"metric": metric, "update": update, "base": {k: base[k] for k in ("mean", "sd", "seeds", "replicates")}, "rows": lines}


def _check_logged(rows: list, curves: dict, update: int, metric: str) -> None:
    """An update or metric that no run logged is an error saying what the runs did log, not a table of empty rows."""
    if any(update in c for c in curves.values()):
        return
    logged = sorted({u for c in curves.values() for u in c})
    if not logged:
        run = rows[0].runs[0].run_dir
        columns = _columns(run / "metrics.csv")
        raise ValueError(f"--metric {metric}: no run logged {metric}; {run}/metrics.csv has the columns {columns}")
    near = sorted(logged, key=lambda u: abs(u - update))[:2]
    raise ValueError(
        f"--at-update {update}: no run logged {metric} after update {update:,}; the nearest logged updates are {', '.join(f'{u:,}' for u in sorted(near))}"
    )


def _columns(path: Path) -> list[str]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return next(csv.reader(fh), [])


def to_markdown(result: dict, title: str | None = None) -> str:
    """The comparison as a Markdown table and the lines that say what it is."""
    default = f"{result['metric']} after update {result['update']:,}, against the base"
    out = [
        f"# {title or default}",
        "",
        "| row | seeds | mean | sd | Δ [95% CI] | p | p Holm | paper Δ | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for ln in result["rows"]:
        delta = (
            "" if "delta" not in ln else f"{ln['delta']:+.2f}" + ("" if ln["low"] is None else f" [{ln['low']:+.2f}, {ln['high']:+.2f}]")
        )
        paper = f"{ln['paper_delta']:+.2f}" if "paper_delta" in ln else ""
        verdict = "control" if ln["control"] else ln.get("verdict", "")
        seeds = f"{ln['seeds']}" + ("" if ln["seeds"] == ln["runs"] else f" of {ln['runs']}")
        mean = "-" if ln["mean"] is None else f"{ln['mean']:.2f}"
        sd = "-" if ln["sd"] is None else f"{ln['sd']:.2f}"
        out.append(
            f"| {ln['row']} | {seeds} | {mean} | {sd} | {delta} | {_p_text(ln.get('p'))} | {_p_text(ln.get('p_holm'))} | {paper} | {verdict} |"
        )
    out += [
        "",
        f"Single checkpoints after update {result['update']:,} (each run's validation there, not a last-K average); Δ: "
        "row minus base, Welch's 95% interval over seeds, two-sided p, Holm over the rows tested; controls (base-... "
        "rows) are not tested. Seeds: runs with a validation after that update, of the row's runs.",
    ]
    others = [ln for ln in result["rows"] if ln["row"] != "base" and not ln["control"]]
    if grouped := [ln["row"] for ln in result["rows"] if ln.get("grouped")]:
        out.append(
            f"Seeds trained as members of one model: {', '.join(grouped)}. A group's members share its length schedule "
            "(docs/members.md), so mean, sd, Δ and p count each group once, by its members' mean; 2 groups or lone "
            "runs on each side make a test."
        )
    if result["base"].get("replicates", result["base"]["seeds"]) < 2:
        out.append(f"Not tested: the base has {_runs_there(result['base'])} there, and a test needs 2 on each side.")
    elif short := [ln for ln in others if ln.get("replicates", ln["seeds"]) < 2]:
        shown = ", ".join(f"{ln['row']} ({ln['seeds']} of {ln['runs']}{' in 1 group' if ln['seeds'] > 1 else ''})" for ln in short)
        out.append(f"Not tested, fewer than 2 runs{' (a member group counting once)' if grouped else ''} there: {shown}.")
    if flat := [ln["row"] for ln in others if "delta" in ln and "p" not in ln]:
        out.append(f"Not tested, no variance (every run of the row and of the base the same there): {', '.join(flat)}.")
    out += [f"{ln['unlike_paper']}." for ln in result["rows"] if ln.get("unlike_paper")]
    part = [f"{ln['row']} ({_seeds(ln['stopped_before'])})" for ln in result["rows"] if ln["seeds"] >= 2 and ln["stopped_before"]]
    if part:
        out.append(
            f"Compared on part of their runs, the others having stopped before update {result['update']:,}: {', '.join(part)}. "
            "Where a stopping rule ended them, the runs still going are a selection (those it let train longer), not a "
            "random subset: choose an update every run reached to avoid it."
        )
    skipped = [ln["row"] for ln in result["rows"] if ln["seeds"] < ln["runs"] - len(ln["stopped_before"])]
    if skipped:
        out.append(
            f"Runs that trained past update {result['update']:,} but logged no validation there (another cadence): {', '.join(skipped)}."
        )
    return "\n".join(out) + "\n"


def _seeds(seeds: list) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def _runs_there(ln: dict) -> str:
    """ "1 run", "12 runs in 1 group" (members: `replicates` counts a group once)."""
    n, k = ln["seeds"], ln.get("replicates", ln["seeds"])
    runs = f"{n} run{'' if n == 1 else 's'}"
    return runs if k == n else f"{runs} in {k} group{'' if k == 1 else 's'}"


def _p_text(p: float | None) -> str:
    return "" if p is None else "< 0.001" if p < 0.001 else f"{p:.3f}"


def _spread(xs: list[float]) -> dict:
    if not xs:
        return {"mean": None, "sd": None}
    interval = seed_intervals.t_interval(xs)
    return {"mean": interval.mean, "sd": interval.sd}


def _attempt(path: Path) -> int:
    """resume-10 after resume-9."""
    suffix = path.parent.name.removeprefix("resume-")
    return int(suffix) if suffix.isdigit() else 0
