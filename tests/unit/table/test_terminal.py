"""`ablate table` in a terminal: at 80 and 120 columns and piped, on the committed Table 3 study (13 rows, controls,
verdicts, caveats), every line fits and no cell is cut; the verdict columns come first and what is left out is named."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from ablate.cli import main
from ablate.table import terminal
from ablate.table.compare import make_table
from ablate.table.load import runs_from_dirs
from ablate.table.render import p_cell
from ablate.table.significance import collect

STUDY = Path(__file__).parents[3] / "studies" / "table3-small"


@pytest.fixture(scope="module")
def table():
    runs = runs_from_dirs(STUDY)
    return make_table(runs, collect(runs, "valid", None), n_boot=20, seed=0)


def fits(lines: list[str], width: int) -> None:
    assert "…" not in "\n".join(lines)
    too_wide = [ln for ln in lines if cell_len(ln) > width]
    assert not too_wide, too_wide


def row_line(lines: list[str], row: str) -> str:
    return next(ln for ln in lines if ln.split("  ")[0].strip() == row)


@pytest.mark.parametrize("width", [80, 120])
def test_every_line_fits_the_width_with_every_cell_whole(table, width):
    lines = terminal.lines(table, "Table 3 layout: table3-small", width, "table3.md")
    fits(lines, width)
    for ln in table.lines[1:]:
        b = ln["bleu"]
        line = row_line(lines, ln["row"])
        delta = f"{b['delta']:+.2f} [{b['test_low']:+.2f}, {b['test_high']:+.2f}]"  # the interval the verdict reads
        assert re.search(rf"^{re.escape(ln['row'])} +{re.escape(delta)} +{re.escape(p_cell(b['p_holm']))}  ", line), line
        assert (b["verdict"] or "control") in line
        if width == 120:  # room for PPL's verdict too
            assert (ln["ppl"]["verdict"] or "control") in line and f"  {ln['ppl']['delta']:+.2f} [" in line
    text = " ".join(lines)
    assert "(A)" in lines and "(base-variants)" in lines  # groups labelled as Table 3 labels them
    assert "table3.md holds every column" in text
    left = "Left out at this width: PPL Δ [CI]" if width == 80 else "Left out at this width: PPL paper Δ, BLEU mean"
    assert left in text
    assert "The base row (5 seeds, mean [95% CI]): BLEU" in text and "Stopped by a limit" in text  # caveats stay


def test_a_width_no_grid_fits_prints_each_row_as_a_paragraph_cut_nowhere(table):
    long = copy.deepcopy(table)
    long.lines[3]["row"] = "A-h1-" + "x" * 150  # a row name wider than the window
    lines = terminal.lines(long, "title", 60, "table3.md")
    fits(lines, 60)
    joined = "".join(ln.strip() for ln in lines)
    assert "A-h1-" + "x" * 150 in joined  # split over lines, not cut
    b = table.lines[3]["bleu"]
    text = " ".join(ln.strip() for ln in lines)
    assert f"base-2x (1 seed); BLEU Δ [CI] {table.lines[1]['bleu']['delta']:+.2f} [" in text
    assert f"(3 seeds); BLEU Δ [CI] {b['delta']:+.2f} [" in text and "verdict inconclusive" in text


def test_the_width_is_columns_else_the_terminals_else_120_for_a_pipe(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert terminal.terminal_width() == 100
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(os, "isatty", lambda fd: False)
    assert terminal.terminal_width() == terminal.PIPE_WIDTH == 120
    monkeypatch.setattr(os, "isatty", lambda fd: True)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((90, 24)))
    assert terminal.terminal_width() == 90


def test_piped_the_command_prints_a_table_that_fits_and_the_paths_of_its_files(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(os, "isatty", lambda fd: False)
    assert main(["table", str(STUDY), "--boot", "20"]) == 0
    out = capsys.readouterr().out.splitlines()
    fits(out, 120)
    assert row_line(out, "A-h32").count("agree") == 2  # both metrics' verdicts at 120
    names = ["table3.md", "table3.tex", "table3.csv", "table3-agreement.csv", "table3.json", "table3.png"]
    assert out[-6:] == [f"wrote     {Path('tables', 'table3-small', n)}" for n in names]
    assert all((tmp_path / "tables" / "table3-small" / n).is_file() for n in names)
