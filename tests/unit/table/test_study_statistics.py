"""The study-wide statistics are listed once (ablate.table.study_statistics): a new one, added there alone, is measured
into table3.json's summary and read in the notes of every rendering."""

from __future__ import annotations

import json

from test_compare import write_runs

from ablate.cli import main
from ablate.table import compare, notes
from ablate.table.study_statistics import STUDY_STATISTICS, StudyStatistic


def test_a_statistic_added_to_the_list_alone_reaches_the_summary_and_every_rendering(tmp_path, monkeypatch):
    def measure(table, metric, seed):
        return {"rows": len(table.rows), "metric": metric}

    def lines(summary):
        return [f"Rows counted by a new statistic: {summary['row_count']['bleu']['rows']}."]

    extended = (*STUDY_STATISTICS, StudyStatistic("row_count", measure, lines))
    monkeypatch.setattr(compare, "STUDY_STATISTICS", extended)
    monkeypatch.setattr(notes, "STUDY_STATISTICS", extended)
    root = write_runs(tmp_path / "study")
    assert main(["table", str(root), "--out", str(tmp_path / "out"), "--boot", "50"]) == 0
    summary = json.loads((tmp_path / "out" / "table3.json").read_text())  # the summary, with the rows
    rows = summary["row_count"]["bleu"]["rows"]
    assert summary["row_count"] == {"bleu": {"rows": rows, "metric": "bleu"}, "ppl": {"rows": rows, "metric": "ppl"}}
    for name in ("table3.md", "table3.tex"):
        assert f"Rows counted by a new statistic: {rows}." in (tmp_path / "out" / name).read_text(), name
    assert {s.key for s in STUDY_STATISTICS} <= summary.keys()  # the listed ones too
