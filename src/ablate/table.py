"""`ablate table STUDY`: a finished sweep in the layout of the paper's Table 3, beside the paper's figures.

Runs are read from a sweep's trial directories (config.yaml + summary.json) or from W&B offline run files
(so runs synced from elsewhere tabulate too); seeds of one row are averaged (mean and spread). Each row shows
only the Table 3 columns it changes against our base row, our PPL/BLEU/params/speed, the paper's PPL/BLEU,
and both deltas to their base. Agreement with the paper: per group, whether each row's BLEU and PPL change
against base has the paper's sign; and Spearman's rank correlation of BLEU (and PPL) over all rows.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ablate.config import flatten
from ablate.paper import TABLE3, PaperRow
from ablate.sweep import row_group

# Table 3's configuration columns: header -> flattened config key.
COLUMNS = {"N": "model.enc_layers", "d_model": "model.d_model", "d_ff": "model.d_ff", "h": "model.heads", "d_k": "model.d_k",
           "d_v": "model.d_v", "P_drop": "model.dropout", "eps_ls": "train.label_smoothing", "pos": "model.positional",
           "attn": "model.attention", "scale": "model.attention_scaling", "kv": "model.kv_heads", "steps": "train.max_steps"}
TIE = {"bleu": 0.05, "ppl": 0.005}  # |delta| at or below this counts as "no change" (the paper prints 1 and 2 decimals)


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


@dataclass
class Row:
    name: str
    group: str
    runs: list[Run] = field(default_factory=list)
    paper: PaperRow | None = None

    def _values(self, attr: str) -> list[float]:
        return [getattr(r, attr) for r in self.runs if getattr(r, attr) is not None and math.isfinite(getattr(r, attr))]

    def mean(self, attr: str) -> float | None:
        v = self._values(attr)
        return statistics.fmean(v) if v else None

    def spread(self, attr: str) -> float | None:
        v = self._values(attr)
        return statistics.stdev(v) if len(v) > 1 else None


def _effective(config: dict) -> dict:
    """d_k/d_v default to d_model/heads: make them explicit so rows compare by value, as the paper prints them."""
    c = dict(config)
    for key in ("model.d_k", "model.d_v"):
        if c.get(key) is None and c.get("model.d_model") and c.get("model.heads"):
            c[key] = c["model.d_model"] // c["model.heads"]
    if c.get("model.enc_layers") != c.get("model.dec_layers"):
        c["model.enc_layers"] = f"{c.get('model.enc_layers')}+{c.get('model.dec_layers')}"
    return c


def _run(row: str, config: dict, summary: dict) -> Run:
    last = summary.get("last", {})
    params = summary.get("params")
    params = params.get("total") if isinstance(params, dict) else params
    if params is None:
        params = summary.get("params/total")
    return Run(row=row, config=_effective(config), ppl=last.get("val/ppl", summary.get("val/ppl")),
               bleu=last.get("val/bleu", summary.get("val/bleu")), params=params,
               tokens_per_s=summary.get("speed/tokens_per_s"), step_ms=summary.get("speed/step_ms"),
               long_bleu=summary.get("val_long/bleu"))


def runs_from_dirs(root: Path) -> list[Run]:
    """Every finished run under `root` (a sweep's out_dir or any folder of run dirs): config.yaml + summary.json."""
    runs = []
    for summary_path in sorted(root.rglob("summary.json")):
        config_path = summary_path.parent / "config.yaml"
        if not config_path.exists():
            continue
        config = flatten(yaml.safe_load(config_path.read_text()))
        row = config.get("sweep.row") or summary_path.parent.name
        runs.append(_run(row, config, json.loads(summary_path.read_text())))
    return runs


def runs_from_wandb(root: Path) -> list[Run]:
    """Every W&B offline run under `root` with a final summary (sweep summary-table runs are skipped)."""
    from ablate.wandb_offline import find_runs, read_run

    runs = []
    for path in find_runs(root):
        run = read_run(path)
        if "summary" in run.tags or "val/bleu" not in run.summary and "last" not in run.summary:
            continue
        row = run.config.get("sweep.row") or run.name
        runs.append(_run(row, run.config, run.summary))
    return runs


def build_rows(runs: list[Run]) -> list[Row]:
    by_name: dict[str, Row] = {}
    paper = {p.name: p for p in TABLE3}
    for run in runs:
        by_name.setdefault(run.row, Row(run.row, row_group(run.row), paper=paper.get(run.row))).runs.append(run)
    order = {p.name: i for i, p in enumerate(TABLE3)}
    return sorted(by_name.values(), key=lambda r: (order.get(r.name, len(order)), r.name))


def _sign(x: float, tie: float) -> int:
    return 0 if abs(x) <= tie else (1 if x > 0 else -1)


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # ties share their average rank
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var else None


@dataclass
class Table:
    rows: list[Row]
    base: Row
    lines: list[dict]  # one per row: the printed cells
    agreement: dict


def make_table(runs: list[Run]) -> Table:
    rows = build_rows(runs)
    base = next((r for r in rows if r.name == "base"), None)
    if base is None:
        raise ValueError(f"no 'base' row among the runs ({sorted(r.name for r in rows)}); Table 3 deltas are against base")
    base_cfg = base.runs[0].config
    paper_base = next(p for p in TABLE3 if p.name == "base")
    lines = []
    for row in rows:
        cfg = row.runs[0].config
        line = {"row": row.name, "group": row.group, "seeds": len(row.runs)}
        for col, key in COLUMNS.items():
            line[col] = "" if row is base or cfg.get(key) == base_cfg.get(key) else cfg.get(key)
        for m in ("ppl", "bleu", "params", "tokens_per_s", "step_ms", "long_bleu"):
            line[m], line[f"{m}_sd"] = row.mean(m), row.spread(m)
        for m in ("ppl", "bleu"):
            ours, ours_base = row.mean(m), base.mean(m)
            line[f"d_{m}"] = None if ours is None or ours_base is None else ours - ours_base
            line[f"paper_{m}"] = getattr(row.paper, m) if row.paper else None
            line[f"paper_d_{m}"] = getattr(row.paper, m) - getattr(paper_base, m) if row.paper else None
        line["paper_params"] = row.paper.params_m if row.paper else None
        lines.append(line)
    return Table(rows, base, lines, agreement(lines))


def agreement(lines: list[dict]) -> dict:
    """Sign agreement of each row's change against base, per group; rank correlations over rows with paper values."""
    groups: dict[str, dict] = {}
    for line in lines:
        if line["row"] == "base" or line["paper_bleu"] is None:
            continue
        g = groups.setdefault(line["group"], {"rows": 0, "bleu_sign": 0, "ppl_sign": 0, "detail": []})
        g["rows"] += 1
        signs = {}
        for m in ("bleu", "ppl"):
            if line[f"d_{m}"] is None:
                continue
            ours, theirs = _sign(line[f"d_{m}"], TIE[m]), _sign(line[f"paper_d_{m}"], TIE[m])
            signs[m] = ours == theirs
            g[f"{m}_sign"] += ours == theirs
        g["detail"].append({"row": line["row"], **{f"{m}_sign_matches": v for m, v in signs.items()}})
    paired = [ln for ln in lines if ln["paper_bleu"] is not None and ln["bleu"] is not None]
    rows_total = sum(g["rows"] for g in groups.values())
    return {
        "groups": groups,
        "bleu_sign_matches": sum(g["bleu_sign"] for g in groups.values()), "ppl_sign_matches": sum(g["ppl_sign"] for g in groups.values()),
        "rows": rows_total,
        "spearman_bleu": spearman([ln["bleu"] for ln in paired], [ln["paper_bleu"] for ln in paired]),
        "spearman_ppl": spearman([ln["ppl"] for ln in paired if ln["ppl"] is not None],
                                 [ln["paper_ppl"] for ln in paired if ln["ppl"] is not None]),
        "n": len(paired),
    }


# -- rendering -------------------------------------------------------------------------------

def _fmt(v, spec: str = ".2f", sd=None) -> str:
    if v is None or v == "":
        return "" if v == "" else "-"
    if isinstance(v, str):
        return v
    text = format(v, spec)
    return f"{text} ± {format(sd, spec)}" if sd is not None else text


def _cells(line: dict) -> list[str]:
    params = "-" if line["params"] is None else f"{line['params'] / 1e6:.1f}"
    return [line["row"], *(_fmt(line[c], "g") if not isinstance(line[c], str) else line[c] for c in COLUMNS),
            _fmt(line["ppl"], ".2f", line["ppl_sd"]), _fmt(line["bleu"], ".2f", line["bleu_sd"]), params,
            _fmt(line["tokens_per_s"], ".0f"), _fmt(line["step_ms"], ".0f"), _fmt(line["long_bleu"], ".2f", line["long_bleu_sd"]),
            _fmt(line["d_ppl"], "+.2f"), _fmt(line["d_bleu"], "+.2f"),
            _fmt(line["paper_ppl"]), _fmt(line["paper_bleu"], ".1f"), _fmt(line["paper_d_ppl"], "+.2f"), _fmt(line["paper_d_bleu"], "+.1f"),
            str(line["seeds"])]


HEADER = ["row", *COLUMNS, "PPL", "BLEU", "params (M)", "tok/s", "step ms", "long BLEU", "ΔPPL", "ΔBLEU",
          "paper PPL", "paper BLEU", "paper ΔPPL", "paper ΔBLEU", "seeds"]


def _compares_with_paper(table: Table) -> bool:
    """Whether any row besides base is a row of the paper's Table 3 (a study of other variants is not)."""
    return table.agreement["rows"] > 0


def _used_columns(table: Table) -> list[int]:
    """Indices of HEADER to show: config columns only where some row changes them; the paper's columns only when
    some row besides base has a paper counterpart."""
    keep = []
    for i, h in enumerate(HEADER):
        if h in COLUMNS and not any(line[h] != "" for line in table.lines):
            continue
        if h.startswith("paper") and not _compares_with_paper(table):
            continue
        if h == "long BLEU" and all(line["long_bleu"] is None for line in table.lines):
            continue
        keep.append(i)
    return keep


def to_markdown(table: Table, title: str) -> str:
    keep = _used_columns(table)
    out = [f"# {title}", "", "| " + " | ".join(HEADER[i] for i in keep) + " |", "|" + "---|" * len(keep)]
    group = None
    for line in table.lines:
        if group is not None and line["group"] != group:
            out.append("| " + " | ".join([f"**({line['group']})**"] + [""] * (len(keep) - 1)) + " |")
        group = line["group"]
        cells = _cells(line)
        out.append("| " + " | ".join(cells[i] for i in keep) + " |")
    out += ["", "Blank config cells are as in our base row. Δ columns are against the base row of the same source.",
            "Mean ± sample standard deviation over seeds where a row has several."]
    if _compares_with_paper(table):
        out += ["", "## Agreement with the paper", "", *agreement_lines(table.agreement)]
    return "\n".join(out) + "\n"


def agreement_lines(a: dict) -> list[str]:
    lines = ["| group | rows | BLEU change has the paper's sign | PPL change has the paper's sign |", "|---|---|---|---|"]
    for g, v in a["groups"].items():
        lines.append(f"| {g} | {v['rows']} | {v['bleu_sign']}/{v['rows']} | {v['ppl_sign']}/{v['rows']} |")
    lines.append(f"| all | {a['rows']} | {a['bleu_sign_matches']}/{a['rows']} | {a['ppl_sign_matches']}/{a['rows']} |")
    fmt = lambda x: "n/a (fewer than 3 rows)" if x is None else f"{x:+.2f}"  # noqa: E731
    lines += ["", f"Spearman rank correlation with the paper over {a['n']} rows: BLEU {fmt(a['spearman_bleu'])}, "
                  f"PPL {fmt(a['spearman_ppl'])}.",
              f"A change counts as none when |Δ| <= {TIE['bleu']} BLEU or {TIE['ppl']} PPL."]
    return lines


def to_latex(table: Table, title: str) -> str:
    keep = _used_columns(table)
    esc = lambda s: str(s).replace("_", r"\_").replace("±", r"$\pm$").replace("Δ", r"$\Delta$")  # noqa: E731
    out = [r"\begin{table}[t]", r"\centering", r"\small", r"\begin{tabular}{" + "l" + "r" * (len(keep) - 1) + "}", r"\toprule",
           " & ".join(esc(HEADER[i]) for i in keep) + r" \\", r"\midrule"]
    group = None
    for line in table.lines:
        if group is not None and line["group"] != group:
            out.append(r"\midrule")
        group = line["group"]
        cells = _cells(line)
        out.append(" & ".join(esc(cells[i]) for i in keep) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{esc(title)}}}", r"\end{table}"]
    return "\n".join(out) + "\n"


def to_csv(table: Table, path: Path) -> None:
    keys = ["row", "group", "seeds", *COLUMNS, "ppl", "ppl_sd", "bleu", "bleu_sd", "params", "params_sd", "tokens_per_s", "tokens_per_s_sd",
            "step_ms", "step_ms_sd", "long_bleu", "long_bleu_sd", "d_ppl", "d_bleu", "paper_ppl", "paper_bleu", "paper_d_ppl", "paper_d_bleu", "paper_params"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table.lines)


def plot(table: Table, path: Path, title: str) -> None:
    """One panel per group: our BLEU change against base beside the paper's, row by row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [g for g in dict.fromkeys(ln["group"] for ln in table.lines) if g != "base"]
    fig, axes = plt.subplots(1, max(len(groups), 1), figsize=(3.2 * max(len(groups), 1), 3.4), squeeze=False)
    for ax, g in zip(axes[0], groups):
        lines = [ln for ln in table.lines if ln["group"] == g]
        xs = range(len(lines))
        ours = [ln["d_bleu"] or 0.0 for ln in lines]
        paper = [ln["paper_d_bleu"] if ln["paper_d_bleu"] is not None else float("nan") for ln in lines]
        ax.bar([x - 0.2 for x in xs], ours, width=0.4, label="ours", color="tab:blue")
        ax.bar([x + 0.2 for x in xs], paper, width=0.4, label="paper", color="tab:gray")
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xticks(list(xs), [ln["row"] for ln in lines], rotation=45, ha="right", fontsize=8)
        ax.set_title(f"({g})" if len(g) == 1 else g)
    axes[0][0].set_ylabel("ΔBLEU vs base")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_table(table: Table, title: str) -> None:
    from rich.console import Console
    from rich.table import Table as RichTable

    keep = _used_columns(table)
    rt = RichTable(*[HEADER[i] for i in keep], title=title)
    group = None
    for line in table.lines:
        if group is not None and line["group"] != group:
            rt.add_section()
        group = line["group"]
        cells = _cells(line)
        rt.add_row(*[cells[i] for i in keep])
    console = Console(width=None if sys.stdout.isatty() else 220)  # logs and pipes get every column
    console.print(rt)
    for text in agreement_lines(table.agreement) if _compares_with_paper(table) else []:
        console.print(text)


def table_cli(args: argparse.Namespace) -> int:
    source = Path(args.study)
    if source.is_file():  # a sweep file: tabulate its out_dir
        from ablate.sweep import load_sweep

        source = load_sweep(source).out_dir
    if not source.exists():
        raise FileNotFoundError(f"no such study directory: {source}")
    runs = runs_from_wandb(source) if args.wandb else runs_from_dirs(source)
    if not runs:
        kind = "W&B offline runs with a summary" if args.wandb else "finished runs (config.yaml + summary.json)"
        raise ValueError(f"found no {kind} under {source}")
    table = make_table(runs)
    title = args.title or f"Table 3 layout: {source.name} ({len(runs)} runs)"
    out = Path(args.out or source)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / args.name
    stem.with_suffix(".md").write_text(to_markdown(table, title))
    stem.with_suffix(".tex").write_text(to_latex(table, title))
    to_csv(table, stem.with_suffix(".csv"))
    plot(table, stem.with_suffix(".png"), title)
    (out / f"{args.name}-agreement.json").write_text(json.dumps(table.agreement, indent=2))
    print_table(table, title)
    print(f"wrote {stem}.md, .tex, .csv, .png and {args.name}-agreement.json")
    return 0
