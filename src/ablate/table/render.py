"""`ablate table`'s renderings of a compared study: Markdown, CSV and JSON (LaTeX: ablate.table.latex; the terminal's
narrower view: ablate.table.terminal), all from one walk over the rows, each followed by the lines of ablate.table.notes."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from ablate.evaluation.records import eval_path
from ablate.sweep.scored_on import scored_on as summary_scored_on
from ablate.sweep.scored_on import sentences
from ablate.table.compare import COLUMNS, Table
from ablate.table.finished_runs import Run
from ablate.table.notes import agreement_notes, agreement_rows, notes, with_interval
from ablate.table.score_kinds import METRICS

TRAINING = {"updates": "updates", "epochs": "epochs", "PFLOP": "flops", "wall min": "wall_seconds", "stopped": "stopped"}


def scored_on(table: Table) -> dict[str, str]:
    """Per metric, what its numbers are on: the split and sentences of the runs' evaluation records, or, for a run
    without one, of its summary's last validation (val/ppl on the whole split, val/bleu often on a sample of it), with
    the number of runs of each where they differ."""
    s = table.summary
    runs = [r for row in table.rows for r in row.runs]
    records = ""
    if s["runs_with_eval_records"]:
        records = sentences(s["split"], s["subset"], s["sentences"]) + ", from each run's evaluation record"
    out = {}
    for metric, key in ((m, kind.log_key) for m, kind in METRICS.items()):
        count: dict[str, int] = {}
        for run in runs:
            if records and (s["runs_with_eval_records"] == s["runs"] or _has_record(run, s["split"])):
                on = records
            else:
                on = (
                    summary_scored_on(run.summary, run.run_dir)[key] or f"{s['split']} split, sentences not recorded"
                ) + ", from each run's last validation"
            count[on] = count.get(on, 0) + 1
        out[metric] = next(iter(count)) if len(count) == 1 else "; ".join(f"{on} ({n} run{'s' * (n > 1)})" for on, n in count.items())
    return out


def scored_on_line(table: Table) -> str:
    """ "Scored on: BLEU and PPL on the valid split, 200 of 1,014 sentences (random, seed 0), ..." """
    on = scored_on(table)
    if on["bleu"] == on["ppl"]:
        return f"Scored on: BLEU and PPL on the {on['bleu']}."
    return f"Scored on: BLEU on the {on['bleu']}. PPL on the {on['ppl']}."


def _has_record(run: Run, split: str) -> bool:
    """Whether `sentence_records.collect` found the run's evaluation record (a file in its run directory, or its summary's)."""
    nested = run.summary.get("eval")
    in_summary = f"eval/{split}" in run.summary or (isinstance(nested, dict) and split in nested)
    return in_summary or (run.run_dir is not None and eval_path(run.run_dir, split).exists())


def number(v, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def p_cell(p) -> str:
    return "-" if p is None else "<0.001" if p < 0.001 else f"{p:.3f}"


def _paired_interval(m: dict) -> str:
    """The paired test's interval; "no variance" where Δ was the same in every resample (se 0: no test). Its own Δ
    leads it where that differs from the Δ column's (paired by schedule: over the base groups on the row's schedules)."""
    if m["test_low"] is None:
        return "no variance" if m["se"] == 0.0 else "-"
    interval = f"[{m['test_low']:+.2f}, {m['test_high']:+.2f}]"
    own = f"{m['test_delta']:+.2f}"
    return interval if m["delta"] is not None and f"{m['delta']:+.2f}" == own else f"{own} {interval}"


def _metric_cells(m: dict, is_base: bool, control: bool) -> dict[str, str]:
    cells = {"": with_interval(m["mean"], m["low"], m["high"])}
    if is_base:
        return cells | {"Δ": "", "paired CI": "", "p": "", "p Holm": "", "MDE": "", "verdict": ""}
    return cells | {
        "Δ": with_interval(m["delta"], m["delta_low"], m["delta_high"], "+.2f"),
        "paired CI": _paired_interval(m),
        "p": p_cell(m["p"]),
        "p Holm": p_cell(m["p_holm"]),
        "MDE": number(m["mde"]),
        "verdict": m["verdict"] or ("control" if control else "-"),  # a control has no verdict (`controls`)
    }


def _cells(line: dict) -> dict[str, str]:
    """Every printable cell of a row, keyed by its header."""
    base = line["row"] == "base"
    # "seeds", not the paper's "N": that is Table 3's column for the number of layers (COLUMNS).
    out = {
        "row": line["row"],
        **{c: line[c] if isinstance(line[c], str) else number(line[c], "g") for c in COLUMNS},
        "seeds": str(line["seeds"]),
    }
    metric = {name: _metric_cells(line[name], base, line["control"]) for name in METRICS}
    for name in METRICS:
        out[f"{METRICS[name].label} [95% CI]"] = metric[name][""]
    lb = line["long_bleu"]
    out |= {
        "params (M)": "-" if line["params"] is None else f"{line['params'] / 1e6:.3g}",  # 0.606, 213: B's drops show
        "tok/s": number(line["tokens_per_s"], ".0f"),
        "step ms": number(line["step_ms"], ".0f"),
        "updates": number(line["updates"], ",.0f"),
        "epochs": number(line["epochs"], ".2f"),  # as summary.json has them: 0.97, not 1.0
        "PFLOP": number(None if line["flops"] is None else line["flops"] / 1e15, ".2f"),
        "wall min": number(None if line["wall_seconds"] is None else line["wall_seconds"] / 60, ".1f"),
        "stopped": line["stopped"] or "-",
        "long BLEU": with_interval(lb["mean"], lb["low"], lb["high"]),
    }
    for name in METRICS:
        for key in ("Δ", "paired CI", "p", "p Holm", "MDE"):
            out[f"Δ{METRICS[name].label} [95% CI]" if key == "Δ" else f"{key} {METRICS[name].label}"] = metric[name][key]
    for name in METRICS:
        out[f"paper {METRICS[name].label}"] = number(line[name]["paper"], METRICS[name].paper_format())
        out[f"paper Δ{METRICS[name].label}"] = "" if base else number(line[name]["paper_delta"], METRICS[name].paper_format(signed=True))
    for name in METRICS:
        out[f"verdict {METRICS[name].label}"] = metric[name]["verdict"]
    return out


def _used_columns(table: Table) -> list[str]:
    """Headers to show: config columns only where some row besides base changes them; the paper's columns and verdicts only when
    some row besides base has a paper counterpart; long BLEU only when measured."""
    keep = []
    for h in _cells(table.lines[0]):
        if h in COLUMNS and not any(line[h] != "" for line in table.lines if line["row"] != "base"):
            continue
        if (h.startswith("paper") or h.startswith("verdict")) and not table.compares_with_paper:
            continue
        if h == "long BLEU" and all(line["long_bleu"]["n"] == 0 for line in table.lines):
            continue
        if h in TRAINING and all(line[TRAINING[h]] in (None, "") for line in table.lines):  # older runs: not recorded
            continue
        keep.append(h)
    return keep


def walk(table: Table) -> Iterator[tuple[bool, str, list[str]]]:
    """(starts a new group, the group, the shown cells) per row, in table order: what every renderer iterates."""
    keep, group = _used_columns(table), None
    for line in table.lines:
        cells = _cells(line)
        yield group is not None and line["group"] != group, line["group"], [cells[h] for h in keep]
        group = line["group"]


def header(table: Table) -> list[str]:
    return _used_columns(table)


def agreement_lines(s: dict) -> list[str]:
    head, *rows = agreement_rows(s)
    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]
    return table + ["", *agreement_notes(s)]


def to_markdown(table: Table, title: str) -> str:
    head = header(table)

    def line(cells: list[str]) -> str:  # a "|" in a cell (a row's name, say) would start a new column
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [f"# {title}", "", scored_on_line(table), "", line(head), "|" + "---|" * len(head)]
    for new_group, group, cells in walk(table):
        if new_group:
            out.append(line([f"**({group})**"] + [""] * (len(head) - 1)))
        out.append(line(cells))
    out += ["", *[f"{line}  " for line in notes(table)]]
    if table.compares_with_paper:
        out += ["", "## Agreement with the paper", "", *agreement_lines(table.summary)]
    return "\n".join(out) + "\n"


def flat(line: dict) -> dict:
    """A row as one level of keys (bleu_mean, bleu_p_holm, ...), for CSV."""
    out = {}
    for k, v in line.items():
        if isinstance(v, dict):
            out.update({f"{k}_{sub}": x for sub, x in v.items()})
        else:
            out[k] = v
    return out


def to_csv(table: Table, path: Path) -> None:
    s, on = table.summary, scored_on(table)
    rows = [
        flat({k: v for k, v in line.items() if k != "unlike_paper"})  # a note (the summary's), in a row's line only where it has one
        | {"split": s["split"], "sentences": s["sentences"], "basis": s["basis"], "bleu_signature": s["bleu_signature"]}
        | {"bleu_on": on["bleu"], "ppl_on": on["ppl"]}
        for line in table.lines
    ]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def to_json(table: Table, title: str) -> dict:
    """Every row's numbers and the study's summary: the source of truth the other renderings are made from."""
    rows = [
        {
            "row": ln["row"],
            "group": ln["group"],
            "seeds": ln["seeds"],
            "changes": {} if ln["row"] == "base" else {c: ln[c] for c in COLUMNS if ln[c] != ""},  # base's: base_config
            **{k: v for k, v in ln.items() if k not in COLUMNS and k not in ("row", "group", "seeds")},
        }
        for ln in table.lines
    ]
    return steady({"title": title, **table.summary, "scored_on": scored_on(table), "rows": rows})


def steady(value):
    """`value` with its floats to 12 significant digits: a study re-rendered on another CPU, whose BLAS sums in
    another order, writes the same bytes (the committed table's JSON differed in the last bit of a fit's slope)."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [steady(v) for v in value]
    return value


def to_agreement_csv(table: Table, path: Path) -> None:
    """The verdict counts per group and metric, with Spearman's rho and its interval on each metric's 'all' line."""
    head, *rows = agreement_rows(table.summary)
    sp = table.summary["spearman"]
    names = {m.label: k for k, m in METRICS.items()}
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*head, "spearman_rho", "spearman_low", "spearman_high", "spearman_rows"])
        for r in rows:
            m = sp[names[r[1]]]
            writer.writerow(r + ([m["rho"], m["low"], m["high"], m["rows"]] if r[0] == "all" else ["", "", "", ""]))
