"""The tables committed in docs/ are what `ablate table` renders from the committed study today: a change to the table's
statistics, verdicts or layout that leaves them stale fails here, naming the command that renders them afresh."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ablate.cli import main

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "studies" / "table3-small"
BLOCK = re.compile(r"<!-- ablate table: begin -->.*<!-- ablate table: end -->", re.S)

pytestmark = pytest.mark.slow  # each render reads 40 runs' records: seconds


def _table(path: Path) -> str:
    """The rendered block of a page (a page of its own: all of it), less the sacreBLEU version (the signature names the
    installed one)."""
    text = path.read_text()
    found = BLOCK.search(text)
    return re.sub(r"version:[\w.]+", "version:*", found.group(0) if found else text)


@pytest.mark.parametrize(
    "name, flags",
    [("table3-small", ["--split", "test"]), ("table3-small-at-8000", ["--at-update", "8000"])],
)
def test_the_committed_table_is_what_ablate_table_renders_from_the_committed_study(tmp_path, capsys, name, flags):
    if not (STUDY / "study.db").is_file():
        pytest.skip("needs the committed study")
    assert main(["table", str(STUDY), *flags, "--out", str(tmp_path), "--name", "table3-small"]) == 0
    capsys.readouterr()
    fresh = _table(tmp_path / f"{name}.md")
    command = f"ablate table studies/table3-small {' '.join(flags)} --out docs --name table3-small --force"
    assert fresh == _table(ROOT / "docs" / f"{name}.md"), f"docs/{name}.md is stale: {command}"
    # its JSON too, floats and all: a render on another CPU (its BLAS summing in another order) wrote other last bits
    assert _table(tmp_path / f"{name}.json") == _table(ROOT / "docs" / f"{name}.json"), f"docs/{name}.json is stale: {command}"
