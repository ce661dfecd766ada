"""A long dry-run table is drawn line for line as rich draws it; one that would wrap is left to rich."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from ablate.sweep.long_table import LONG, print_table

HEADER = ["row", "seed", "differences from the base config"]


def _printed(draw, width: int = 160) -> str:
    console = Console(file=io.StringIO(), width=width)
    draw(console)
    return console.file.getvalue()


def _rich(console: Console, rows: list[list[str]]) -> None:
    table = Table(*HEADER)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def test_a_long_table_is_what_rich_prints():
    rows = [[f"r{i}", str(i % 5), f"model.d_ff: 256 -> {i}, train.lr_scale: 0.35 -> 0.{i} (ü, 表)"] for i in range(LONG + 50)]
    rows[3][2] = "(base)"
    assert _printed(lambda c: print_table(c, HEADER, rows)) == _printed(lambda c: _rich(c, rows))


def test_a_long_table_too_wide_for_the_console_wraps_as_rich_wraps_it():
    rows = [[f"r{i}", "-", "x" * 200] for i in range(LONG)]
    wrapped = _printed(lambda c: print_table(c, HEADER, rows), width=100)
    assert wrapped == _printed(lambda c: _rich(c, rows), width=100) and max(map(len, wrapped.splitlines())) <= 100
