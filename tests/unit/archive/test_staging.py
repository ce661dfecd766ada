"""An archive written whole or not at all (`ablate.archive.staging.staging`): a new DEST is one rename, an existing
one gets the files moved in under ARCHIVE_INCOMPLETE with the database last, a failure leaves DEST as it was, and a
dead writer's temporary folder is removed by the next archive."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ablate.archive.staging import staging
from ablate.archive.study_db import DATABASE
from ablate.files.destination import ARCHIVE_INCOMPLETE


def tree(root):
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_new_archive_appears_whole_and_leaves_no_temporary_folder(tmp_path):
    dest = tmp_path / "studies" / "q"
    with staging(dest) as stage:
        assert stage.parent == dest.parent and not dest.exists()
        (stage / DATABASE).write_text("db")
        (stage / "trials").mkdir()
        (stage / "trials" / "summary.json").write_text("{}")
    assert tree(dest) == {DATABASE: "db", "trials/summary.json": "{}"}
    assert os.listdir(dest.parent) == ["q"]


def test_an_update_moves_files_in_database_last_and_removes_the_marker(tmp_path, monkeypatch):
    dest = tmp_path / "q"
    dest.mkdir()
    (dest / "old.json").write_text("kept")
    (dest / DATABASE).write_text("old db")
    moved = []
    real_replace = os.replace

    def replace(src, dst):
        moved.append((os.path.basename(dst), (dest / ARCHIVE_INCOMPLETE).exists()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with staging(dest) as stage:
        (stage / DATABASE).write_text("new db")
        (stage / "a.json").write_text("a")
    assert moved == [("a.json", True), (DATABASE, True)]  # under the marker, the database last
    assert tree(dest) == {DATABASE: "new db", "a.json": "a", "old.json": "kept"}


def test_a_failure_leaves_dest_as_it_was_and_no_folders_it_made(tmp_path):
    dest = tmp_path / "new" / "deeper" / "q"
    with pytest.raises(RuntimeError, match="refused"), staging(dest) as stage:
        (stage / DATABASE).write_text("half")
        raise RuntimeError("refused")
    assert not (tmp_path / "new").exists()


def test_a_dead_writers_temporary_folder_goes_a_living_ones_stays(tmp_path):
    dest = tmp_path / "q"
    dead_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process can have it
    dead, alive = tmp_path / f".q.archive-{dead_pid}.tmp", tmp_path / f".q.archive-{os.getppid()}.tmp"
    dead.mkdir()
    alive.mkdir()
    with staging(dest) as stage:
        (stage / DATABASE).write_text("db")
    assert not dead.exists() and alive.exists()
