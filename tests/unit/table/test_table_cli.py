"""`ablate table`'s files are each replaced whole or not at all: a failure while rendering one leaves the earlier
table's file as it was, and no temporary behind."""

from __future__ import annotations

import pytest
from test_compare import write_runs

from ablate.cli import main


def test_a_rendering_that_fails_leaves_the_earlier_files_whole(tmp_path, monkeypatch):
    root, out = write_runs(tmp_path / "study"), tmp_path / "out"
    assert main(["table", str(root), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"table3.md", "table3.tex", "table3.csv", "table3-agreement.csv", "table3.json", "table3.png"}

    def half_a_plot(table, path, title):
        path.write_bytes(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr("ablate.table.cli.plot", half_a_plot)
    with pytest.raises(KeyboardInterrupt):
        main(["table", str(root), "--out", str(out), "--title", "again"])
    assert (out / "table3.png").read_bytes() == before["table3.png"]  # not the half-written one
    assert {p.name for p in out.iterdir()} == set(before)  # no temporary left
    assert "again" in (out / "table3.json").read_text()  # the files before it were replaced whole
