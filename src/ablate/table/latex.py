"""`ablate table`'s LaTeX: the table with Table 3's group labels, the agreement counts when rows of the paper are
present, and every note of the Markdown in the caption (booktabs rules)."""

from __future__ import annotations

from ablate.table.compare import Table
from ablate.table.notes import agreement_notes, agreement_rows, notes
from ablate.table.render import header, walk

_TEX = {
    **{c: "\\" + c for c in "&%$#_{}"},
    "\\": r"\textbackslash{}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"$<$",
    ">": r"$>$",
    "|": r"\textbar{}",
    "±": r"$\pm$",
    "Δ": r"$\Delta$",
    "≤": r"$\le$",
    "≥": r"$\ge$",
    "−": "--",
    "²": r"$^2$",
    "σ": r"$\sigma$",
    "·": r"$\cdot$",
}


def _esc(s) -> str:
    """Text as LaTeX source: its special characters escaped, the few symbols our notes use in math mode."""
    return "".join(_TEX.get(c, c) for c in str(s))


def _tabular(head: list[str], body: list[str]) -> list[str]:
    return [
        r"\begin{tabular}{" + "l" + "r" * (len(head) - 1) + "}",
        r"\toprule",
        " & ".join(_esc(h) for h in head) + r" \\",
        r"\midrule",
        *body,
        r"\bottomrule",
        r"\end{tabular}",
    ]


def to_latex(table: Table, title: str) -> str:
    """The table (group labels as in Table 3), the agreement counts when rows of the paper are present, and every
    note of the Markdown in the caption."""
    head = header(table)
    body = []
    for new_group, group, cells in walk(table):
        if new_group:
            body += [r"\midrule", rf"\multicolumn{{{len(head)}}}{{l}}{{\textit{{({_esc(group)})}}}} \\"]
        body.append(" & ".join(_esc(c) for c in cells) + r" \\")
    out = [r"\begin{table}[t]", r"\centering", r"\small", *_tabular(head, body)]
    caption = [title + ".", *notes(table)]
    if table.compares_with_paper:
        agree_head, *agree = agreement_rows(table.summary)
        out += [r"\par\medskip", *_tabular(agree_head, [" & ".join(_esc(c) for c in r) + r" \\" for r in agree])]
        caption += ["Second table: agreement with the paper.", *agreement_notes(table.summary)]
    out += [rf"\caption{{{_esc(' '.join(caption))}}}", r"\end{table}"]
    return "\n".join(out) + "\n"
