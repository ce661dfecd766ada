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
from ablate.table.finished_runs import runs_from_dirs
from ablate.table.render import p_cell
from ablate.table.sentence_records import collect

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


def test_every_rendering_says_what_its_scores_are_on(tmp_path):
    """The reported case: `ablate table` said PPL 31.44 (a 200-sentence sample) where the sweep's table said 33.65 (the
    whole split) for the same run, with nothing saying why. Each rendering names the split and sentences, per metric
    where they differ: a run without an evaluation record keeps its summary's, val/ppl on the whole split."""
    from types import SimpleNamespace

    from table_study import markdown_rows, references, system, write_run

    from ablate.experiment import load_config
    from ablate.run.evaluation import scored_on as recorded_on
    from ablate.table.render import scored_on_line, to_csv, to_json, to_markdown

    cfg = load_config(train={"val_max_sentences": 200})
    summary = recorded_on(cfg, SimpleNamespace(raw=lambda split: ([], ["ref"] * 1014))) | {"last": {"val/bleu": 20.0, "val/ppl": 9.0}}
    refs = references(40)
    for row, rate in (("base", 0.5), ("A-h1", 0.6)):
        for seed in (1, 2):
            record = system(refs, rate, seed) | {"references": refs, "subset": "random 40 of 1014 (seed 0)"}
            write_run(tmp_path, row, seed, summary=summary | {"epochs": 0.97}, records={"valid": record})

    def rendered() -> tuple[str, list[str]]:
        runs = runs_from_dirs(tmp_path)
        table = make_table(runs, collect(runs, "valid"), n_boot=20, seed=0)
        to_csv(table, tmp_path / "t.csv")
        csv_on = (tmp_path / "t.csv").read_text().splitlines()[1]
        md = to_markdown(table, "t")
        assert scored_on_line(table) in md and to_json(table, "t")["scored_on"]["bleu"] in csv_on
        assert markdown_rows(md)["base"]["epochs"] == "0.97"  # as summary.json has it, not rounded to 1.0
        return scored_on_line(table), terminal.lines(table, "t", 400, "t.md")

    line, shown = rendered()
    assert line == "Scored on: BLEU and PPL on the valid split, 40 of 1,014 sentences (random, seed 0), from each run's evaluation record."
    assert shown[1] == line  # right under the title
    (tmp_path / "trials" / "A-h1-s2" / "eval" / "valid.json").unlink()
    line, _ = rendered()
    record, last = "from each run's evaluation record (3 runs)", "from each run's last validation (1 run)"
    assert line == (
        f"Scored on: BLEU on the valid split, 40 of 1,014 sentences (random, seed 0), {record}; valid split, 200 of 1,014 "
        f"sentences (random, seed 0), {last}. PPL on the valid split, 40 of 1,014 sentences (random, seed 0), {record}; "
        f"valid split, all 1,014 sentences, {last}."
    )
    for path in (tmp_path / "trials").glob("*/eval/valid.json"):
        path.unlink()
    line, _ = rendered()
    assert line == (
        "Scored on: BLEU on the valid split, 200 of 1,014 sentences (random, seed 0), from each run's last validation. "
        "PPL on the valid split, all 1,014 sentences, from each run's last validation."
    )
