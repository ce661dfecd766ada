"""`ablate table`'s figure: which rows it draws, and with which interval."""

from __future__ import annotations

import pytest
from table_study import references, system, write_run

from ablate.table.compare import make_table
from ablate.table.finished_runs import runs_from_dirs
from ablate.table.plot import CONTROLS, figure, verdict_interval
from ablate.table.sentence_records import collect


def _error_bars(ax) -> int:
    from matplotlib.container import ErrorbarContainer

    return sum(isinstance(c, ErrorbarContainer) for c in ax.containers)


def test_the_bar_shows_the_paired_test_interval_else_welch_else_none():
    m = {"test_low": -1.0, "test_high": 2.0, "delta_low": -0.5, "delta_high": 1.5}
    assert verdict_interval(m) == (-1.0, 2.0)
    assert verdict_interval(m | {"test_low": None, "test_high": None}) == (-0.5, 1.5)
    assert verdict_interval(dict.fromkeys(m)) is None


@pytest.mark.filterwarnings("error")
def test_a_tested_one_seed_row_has_the_test_interval_and_a_significant_row_is_starred(tmp_path):
    refs = references(60)
    rows = {"base": (0.3, [1, 2, 3]), "A-h1": (0.9, [1, 2, 3]), "A-h4": (0.3, [1])}
    for row, (rate, seeds) in rows.items():
        for seed in seeds:
            write_run(tmp_path, row, seed, records={"valid": {"references": refs, **system(refs, rate, 10 * seed + len(row))}})
    runs = runs_from_dirs(tmp_path)
    table = make_table(runs, collect(runs, "valid"), n_boot=200)
    lines = {ln["row"]: ln["bleu"] for ln in table.lines}
    assert lines["A-h1"]["p_holm"] < 0.05 and lines["A-h4"]["delta_low"] is None and lines["A-h4"]["test_low"] is not None
    fig = figure(table, "t")
    ax = fig.axes[0]
    ours = ax.patches[:2]  # our two bars, then the paper's two
    assert [b.get_hatch() for b in ours] == [None, None]  # A-h4 has one seed but a paired test: it has an interval
    assert sum(t.get_text() == "*" for t in ax.texts) == 1
    assert _error_bars(ax) == 2


def test_a_row_without_interval_is_hatched(tmp_path):
    for row, seeds in {"base": [1], "A-h1": [1]}.items():
        for seed in seeds:
            write_run(tmp_path, row, seed)  # summaries only: no records, one seed each, so no test and no interval
    table = make_table(runs_from_dirs(tmp_path))
    ax = figure(table, "t").axes[0]
    assert ax.patches[0].get_hatch() == "//" and _error_bars(ax) == 0


def test_the_controls_panel_says_what_its_bars_are_against(tmp_path):
    refs = references(60)
    for row, seeds in {"base": [1, 2], "A-h1": [1, 2], "base-2x": [2]}.items():
        for seed in seeds:
            write_run(tmp_path, row, seed, records={"valid": {"references": refs, **system(refs, 0.3, 10 * seed + len(row))}})
    runs = runs_from_dirs(tmp_path)
    fig = figure(make_table(runs, collect(runs, "valid"), n_boot=200), "t")
    assert [ax.get_title() for ax in fig.axes] == [CONTROLS, "(A)"]  # controls right after base, as in the table
