"""`ablate table` in a terminal: per row the columns a reader judges it by (Δ with the interval its verdict reads,
p Holm, the verdict, the paper's Δ), as many as fit the width and every cell whole, then the lines that qualify
them; every other column and note is in the files (`ablate.table.render`), whose paths the command prints."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from rich.cells import cell_len

from ablate.table.compare import Table
from ablate.table.notes import agreement_notes, agreement_rows, scores_line, with_interval
from ablate.table.plot import verdict_delta, verdict_interval
from ablate.table.render import number, p_cell, scored_on_line
from ablate.table.score_kinds import METRICS

PIPE_WIDTH = 120  # a pipe or a log has no width of its own: this one holds both metrics' verdict columns
GAP = "  "
# Where the rest is, named under the table so a reader knows the terminal shows a part.
IN_THE_FILES = "every column (config, seed intervals, p, paired CI, MDE, speed, training length) and notes"


@dataclass(frozen=True)
class Column:
    metric: str | None  # the label above the column: BLEU, PPL, or none
    head: str
    cell: Callable[[dict], str]
    right: bool = True  # numbers align right; words and intervals left


def terminal_width() -> int:
    """$COLUMNS when in the environment (`COLUMNS=100 ablate table ... | less` asks for a width), else the terminal's,
    else PIPE_WIDTH: a pipe or a log still gets lines that fit a usual window."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return os.get_terminal_size(1).columns if os.isatty(1) else PIPE_WIDTH
    except (OSError, ValueError):
        return PIPE_WIDTH


def _delta(m: dict) -> str:
    """ "+1.36 [+0.12, +2.60]": the Δ and interval the verdict reads (the paired test's, else the Welch ones)."""
    delta = verdict_delta(m)
    if delta is None:
        return "-"
    span = verdict_interval(m)
    return f"{delta:+.2f}" + ("" if span is None else f" [{span[0]:+.2f}, {span[1]:+.2f}]")


def columns(table: Table) -> list[Column]:
    """The terminal's columns, most needed first: the width keeps a prefix of this list."""

    def blank_on_base(f: Callable[[dict], str]) -> Callable[[dict], str]:
        return lambda ln: "" if ln["row"] == "base" else f(ln)

    out = [Column(None, "row", lambda ln: ln["row"] + (" (diverged)" if ln["diverged"] else ""), right=False)]
    for m in METRICS:
        spec = METRICS[m].paper_format(signed=True)
        out += [
            Column(m, "Δ [CI]", blank_on_base(lambda ln, m=m: _delta(ln[m])), right=False),
            Column(m, "p Holm", blank_on_base(lambda ln, m=m: p_cell(ln[m]["p_holm"]))),
        ]
        if table.compares_with_paper:  # a control has no verdict (`ablate.table.controls`)
            verdict = blank_on_base(lambda ln, m=m: ln[m]["verdict"] or ("control" if ln["control"] else "-"))
            paper = blank_on_base(lambda ln, m=m, spec=spec: number(ln[m]["paper_delta"], spec))
            out += [Column(m, "verdict", verdict, right=False), Column(m, "paper Δ", paper)]
    out += [Column(m, "mean", lambda ln, m=m: number(ln[m]["mean"])) for m in METRICS]
    return out + [Column(None, "seeds", lambda ln: str(ln["seeds"]))]


def _order(c: Column) -> tuple[int, int]:
    """Shown left to right: row, seeds, then per metric mean, Δ, p Holm, verdict, paper Δ."""
    heads = ["row", "seeds", "mean", "Δ [CI]", "p Holm", "verdict", "paper Δ"]
    return (0 if c.metric is None else 1 + list(METRICS).index(c.metric), heads.index(c.head))


def grid(heads: list[str], rows: list[list[str]], right: list[bool], width: int, above: list[str] | None = None) -> list[str] | None:
    """The rows as aligned text lines under their headers (and `above`, a label line over the columns it starts),
    or None when they do not fit `width`: nothing is cut."""
    widths = [max(cell_len(c) for c in col) for col in zip(heads, *rows)]
    if sum(widths) + len(GAP) * (len(widths) - 1) > width:
        return None

    def line(cells: list[str], align: list[bool]) -> str:
        pad = [" " * (w - cell_len(c)) for c, w in zip(cells, widths)]
        return GAP.join(p + c if r else c + p for c, p, r in zip(cells, pad, align)).rstrip()

    head = [line(heads, right), GAP.join("─" * w for w in widths)]
    label = [line(above, [False] * len(above))] if above and any(above) else []
    return label + head + [line(r, right) for r in rows]


def _fitted(table: Table, width: int) -> tuple[list[Column], list[Column], list[str]] | None:
    """The longest prefix of `columns` (at least row and one Δ) whose grid fits: (shown, left out, its lines)."""
    ranked = columns(table)
    for k in range(len(ranked), 1, -1):
        shown = sorted(ranked[:k], key=_order)
        heads = [c.head for c in shown]
        above = [METRICS[c.metric].label if c.metric and (i == 0 or shown[i - 1].metric != c.metric) else "" for i, c in enumerate(shown)]
        body = [[c.cell(ln) for c in shown] for ln in table.lines]
        if lines := grid(heads, body, [c.right for c in shown], width, above):
            return shown, ranked[k:], lines
    return None


def _with_groups(table: Table, lines: list[str], head_lines: int) -> list[str]:
    """The grid with a "(A)" line where a group starts, as the paper's Table 3 labels its groups."""
    out, group = lines[:head_lines], None
    for ln, text in zip(table.lines, lines[head_lines:]):
        if group is not None and ln["group"] != group:
            out.append(f"({ln['group']})")
        out.append(text)
        group = ln["group"]
    return out


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """`text` in lines of at most `width` (a word longer than that, a long row name say, is split, not cut)."""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False) or [""]


def _records(table: Table, width: int) -> list[str]:
    """A row per paragraph, for a width no grid fits (a long row name, a narrow window)."""
    cols = columns(table)
    out = []
    for ln in table.lines:
        parts = [", ".join(f"{c.head} {v}" for c in cols if c.metric == m and (v := c.cell(ln))) for m in METRICS]
        seeds = f"{ln['seeds']} seed{'' if ln['seeds'] == 1 else 's'}"
        text = f"{ln['row']} ({seeds})" + "".join(f"; {METRICS[m].label} {p}" for m, p in zip(METRICS, parts) if p)
        out += _wrap(text, width, "  ")
    return out


def _agreement(table: Table, width: int) -> list[str]:
    head, *rows = agreement_rows(table.summary)
    lines = grid(head, rows, [False, False] + [True] * (len(head) - 2), width)
    return lines or [w for r in rows for w in _wrap(", ".join(f"{h} {c}" for h, c in zip(head, r)), width, "  ")]


def lines(table: Table, title: str, width: int, page: str) -> list[str]:
    """What `ablate table` prints for `table`, whose whole rendering is in the file `page`: every line at most
    `width` wide, no cell cut."""

    def wrap(text: str) -> list[str]:
        return _wrap(text, width)

    legend = "Δ [CI]: row minus base, with the 95% interval the verdict reads (the paired test's; the Welch interval over seeds"
    legend += " where a row has no test); p Holm: the paired test's p, Holm-corrected"
    if fitted := _fitted(table, width):
        shown, left, grid_lines = fitted
        body = _with_groups(table, grid_lines, len(grid_lines) - len(table.lines))
        legend += "; mean: over seeds." if any(c.head == "mean" for c in shown) else "."
        if left:
            legend += (
                " Left out at this width: " + ", ".join(f"{METRICS[c.metric].label + ' ' if c.metric else ''}{c.head}" for c in left) + "."
            )
    else:
        body, legend = _records(table, width), legend + "; mean: over seeds."
    base = table.lines[0]
    means = ", ".join(f"{METRICS[m].label} {with_interval(base[m]['mean'], base[m]['low'], base[m]['high'])}" for m in METRICS)
    legend += f" The base row ({table.summary['base_seeds']}, mean [95% CI]): {means}."
    if table.summary.get("member_groups"):
        legend += " A member group's seeds count once, by their mean."
    out = [*wrap(title), *wrap(scored_on_line(table)), "", *body, "", *wrap(legend), *wrap(scores_line(table.summary))]
    for note in table.summary["notes"]:  # caveats on particular rows: runs left out, untested rows, controls, limits
        out += wrap(note)
    if table.compares_with_paper:
        out += ["", *_agreement(table, width)]
        for note in agreement_notes(table.summary):
            out += wrap(note)
    return out + ["", *wrap(f"{page} holds {IN_THE_FILES}.")]
