"""A table of many rows printed in a fraction of the time rich takes: rich lays out every cell, 2 s of a 5,000-row
dry run. A table that long, whose lines fit the console unwrapped, is drawn here in rich's own box (HEAVY_HEAD), line
for line what rich prints less the header's bold; a short table, or one that must wrap, goes to rich."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

LONG = 200  # rows from which a table is drawn here


def print_table(console: Console, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(map(cell_len, column)) for column in zip(header, *rows, strict=True)]
    fits = sum(widths) + 3 * len(widths) + 1 <= console.width and not any("\n" in cell for row in rows for cell in row)
    if len(rows) < LONG or not fits:
        table = Table(*header)
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return

    def edge(left: str, fill: str, cross: str, right: str) -> str:
        return left + cross.join(fill * (w + 2) for w in widths) + right

    def line(cells: list[str], bar: str) -> str:
        return bar + bar.join(f" {cell}{' ' * (w - cell_len(cell))} " for cell, w in zip(cells, widths, strict=True)) + bar

    lines = [edge("┏", "━", "┳", "┓"), line(header, "┃"), edge("┡", "━", "╇", "┩")]
    lines += [line(row, "│") for row in rows] + [edge("└", "─", "┴", "┘")]
    console.out("\n".join(lines), highlight=False)
