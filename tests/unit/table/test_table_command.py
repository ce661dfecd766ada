"""`ablate table`'s files are replaced together or not at all: a bad argument, an output it cannot write, a
failure while rendering or a file with other content (unless --force) leaves every earlier file as it was, and no
temporary behind (a scratch folder a kill -9 left goes with the next table); by default they go under
./tables/FOLDER/, never into the study's own folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from table_study import references, system, write_run
from test_compare import ROWS, write_runs

from ablate.cli import main


def test_a_rendering_that_fails_changes_none_of_the_files(tmp_path, monkeypatch, capsys):
    root, out = write_runs(tmp_path / "study"), tmp_path / "out"
    assert main(["table", str(root), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"table3.md", "table3.tex", "table3.csv", "table3-agreement.csv", "table3.json", "table3.png"}

    def half_a_plot(table, path, title):
        path.write_bytes(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr("ablate.table.commands.plot", half_a_plot)
    assert main(["table", str(root), "--out", str(out), "--title", "again"]) == 130  # one line, no traceback (issue 38)
    assert capsys.readouterr().err.strip() == "ablate table: stopped by Ctrl-C (SIGINT); no file was left half-written or temporary"
    # The set is replaced together: the page and JSON written before the plot failed are not swapped in either, so
    # the files never mix two renderings, and no temporary is left.
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["--boot", "1"], r"--boot: expected at least 10 bootstrap resamples \(default 1000\), got 1"),
        (["--name", ""], r"--name: expected a file name stem without a folder \(e.g. table3\), got ''"),
        (["--name", "a/b"], r"--name: expected a file name stem without a folder \(e.g. table3\), got 'a/b'"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_read_or_written(tmp_path, capsys, args, message):
    root = write_runs(tmp_path / "study")
    assert main(["table", str(root), "--out", str(tmp_path / "out"), *args]) == 2
    assert re.search(message, capsys.readouterr().err) and not (tmp_path / "out").exists()


def test_outputs_that_cannot_be_written_are_named_before_any_file_changes(tmp_path, capsys):
    root, out = write_runs(tmp_path / "study"), tmp_path / "out"
    (tmp_path / "afile").write_text("mine")
    assert main(["table", str(root), "--out", str(tmp_path / "afile")]) == 2
    assert f"{tmp_path / 'afile'} is a file, not a folder; nothing was written" in capsys.readouterr().err
    assert (tmp_path / "afile").read_text() == "mine"
    assert main(["table", str(root), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "table3.csv").unlink()
    (out / "table3.csv").mkdir()  # a folder where a file goes: refused up front, the page and the rest untouched
    assert main(["table", str(root), "--out", str(out), "--title", "again"]) == 2
    assert f"{out / 'table3.csv'} is a folder, where a file is to be written" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == {k: v for k, v in before.items() if k != "table3.csv"}


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_non_finite_number_is_named_by_where_it_is_and_nothing_is_written(tmp_path, capsys):
    """Every NLL finite, but their sum overflows, so the PPL test is not a number. The JSON would refuse it after
    the page was written; it is found first, by its row and field."""
    refs = references(30)
    for row, rate in (("base", 0.3), ("A-h1", 0.6)):
        for seed in (1, 2):
            fields = system(refs, rate, seed + len(row))
            if row == "A-h1":
                fields["nll"] = [1e308] * len(refs)
            write_run(tmp_path / "study", row, seed, ROWS[row][0], records={"valid": {**fields, "references": refs}})
    assert main(["table", str(tmp_path / "study"), "--out", str(tmp_path / "out"), "--boot", "20"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"the table holds a non-finite number \(row 'A-h1', 'ppl'\['\w+'\]\)", err), err
    assert not (tmp_path / "out").exists()


def test_a_bar_in_a_row_name_stays_in_its_cell(tmp_path):
    rows = {**ROWS, "X|Y": ({"model.d_ff": 512}, [(1, 30.0, 5.0)])}
    root, out = write_runs(tmp_path / "study", rows), tmp_path / "out"
    assert main(["table", str(root), "--out", str(out)]) == 0
    md = (out / "table3.md").read_text().splitlines()
    head = next(line for line in md if line.startswith("| row |"))
    line = next(line for line in md if line.startswith("| X"))
    assert line.startswith("| X\\|Y |") and line.replace("\\|", "").count("|") == head.count("|")


def test_by_default_the_files_go_under_tables_not_into_the_study(tmp_path, monkeypatch, capsys):
    root = write_runs(tmp_path / "study")
    monkeypatch.chdir(tmp_path)
    assert main(["table", str(root)]) == 0
    names = {"table3.md", "table3.tex", "table3.csv", "table3-agreement.csv", "table3.json", "table3.png"}
    assert {p.name for p in (tmp_path / "tables" / "study").iterdir()} == names
    assert not any(p.name.startswith("table3") for p in root.iterdir())  # the study's folder (evidence) is not written
    assert f"wrote     {Path('tables', 'study', 'table3.md')}" in capsys.readouterr().out


def test_a_file_with_other_content_is_replaced_only_with_force_and_an_identical_one_is_left(tmp_path, capsys):
    root, out = write_runs(tmp_path / "study"), tmp_path / "out"
    assert main(["table", str(root), "--out", str(out)]) == 0
    capsys.readouterr()
    before = {p.name: (p.read_bytes(), p.stat().st_ino) for p in out.iterdir()}
    assert main(["table", str(root), "--out", str(out)]) == 0  # the same table: nothing to replace, nothing touched
    assert capsys.readouterr().out.count("unchanged ") == 6
    assert {p.name: (p.read_bytes(), p.stat().st_ino) for p in out.iterdir()} == before

    (out / "table3.csv").write_text("edited by hand\n")
    assert main(["table", str(root), "--out", str(out), "--title", "another title"]) == 2
    err = capsys.readouterr().err
    differ = ", ".join(str(out / n) for n in ("table3.md", "table3.tex", "table3.csv", "table3.json", "table3.png"))
    assert f"{differ} already there with other content and would be replaced; nothing was written: pass --force" in err
    assert "table3-agreement.csv" not in err  # the same as the new one: not a change
    assert (out / "table3.csv").read_text() == "edited by hand\n" and (out / "table3.md").read_bytes() == before["table3.md"][0]
    assert sorted(p.name for p in out.iterdir()) == sorted(before)  # no temporary left

    assert main(["table", str(root), "--out", str(out), "--title", "another title", "--force"]) == 0
    printed = capsys.readouterr().out
    assert f"replaced  {out / 'table3.csv'}" in printed and f"unchanged {out / 'table3-agreement.csv'}" in printed
    assert "# another title" in (out / "table3.md").read_text() and (out / "table3.csv").read_text().startswith("row,")


def test_a_scratch_folder_a_killed_table_left_is_removed_by_the_next(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys
    import tempfile

    from ablate.files.atomic import HOST_TAG
    from ablate.table import file_writes

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    left = tmp_path / "tmp" / f".ablate-table.{HOST_TAG}-{gone}.abc.tmp"
    live = tmp_path / "tmp" / f".ablate-table.{HOST_TAG}-{os.getppid()}.def.tmp"  # another table's, still running
    for folder in (left, live):
        folder.mkdir()
        (folder / "0-table3.md").write_text("half")
    assert file_writes.render({tmp_path / "t.md": lambda p: p.write_text("x")}) == {tmp_path / "t.md": b"x"}
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == [live.name]


def test_a_rename_refused_halfway_puts_back_the_files_renamed_before_it(tmp_path, monkeypatch):
    """Signals review: table3.tex refused its rename (immutable; another user's file in a shared folder) after the
    .json had been replaced, leaving a mix of the new and the old table, and an errno naming the hidden temporary."""
    import os

    from ablate.table import file_writes

    out = tmp_path / "out"
    out.mkdir()
    for name in ("t.md", "t.tex", "t.json"):
        (out / name).write_text("old")
    real = os.replace

    def refuse_tex(src, dst):
        if Path(dst).name == "t.tex":
            raise PermissionError(1, "Operation not permitted", str(src), None, str(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", refuse_tex)
    with pytest.raises(
        ValueError, match=f"^{out / 't.tex'} could not be replaced \\(Operation not permitted\\); the table's files are as they were$"
    ):
        file_writes.write({out / n: b"new" for n in ("t.md", "t.png", "t.tex", "t.json")}, force=True)
    assert {p.name: p.read_text() for p in out.iterdir()} == {"t.md": "old", "t.tex": "old", "t.json": "old"}


def test_a_write_failing_into_new_folders_leaves_none_of_them(tmp_path, monkeypatch):
    """Signals review: `--out NEW/SUB` on a full disk left NEW/SUB, made before the writes that would remove it."""
    import errno

    from ablate.files.atomic import DiskFull
    from ablate.table import file_writes

    real = Path.write_bytes

    def full(self, data):
        if ".t.csv." in self.name:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(DiskFull):
        file_writes.write({tmp_path / "new" / "sub" / n: b"new" for n in ("t.md", "t.csv")}, force=False)
    assert list(tmp_path.iterdir()) == []


def test_a_second_table_into_the_same_folder_waits_for_the_first_to_finish_writing(tmp_path):
    """Two `ablate table --out X` at once: each checks what is there and renames its files under the folder's lock, so
    the second sees the first's files (refused without --force) and never leaves a mix of both."""
    import fcntl
    import os
    import threading
    import time

    from ablate.table import file_writes

    out = tmp_path / "out"
    out.mkdir()
    held = os.open(out, os.O_RDONLY)  # the first table, between its check and its last rename
    fcntl.flock(held, fcntl.LOCK_EX)
    done = []

    def second():
        try:
            done.append(file_writes.write({out / "t.md": b"second", out / "t.csv": b"second"}, force=False))
        except ValueError as e:
            done.append(e)

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.5)
    assert not done and not (out / "t.md").exists()  # waiting
    (out / "t.md").write_bytes(b"first")  # what the first wrote
    (out / "t.csv").write_bytes(b"first")
    fcntl.flock(held, fcntl.LOCK_UN)
    os.close(held)
    thread.join(10)
    assert "already there with other content" in str(done[0])  # refused: it saw the first's files
    assert (out / "t.md").read_bytes() == (out / "t.csv").read_bytes() == b"first"
