"""A file is replaced whole or not at all."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ablate.atomic import replacing, unwritable


def test_the_target_is_replaced_when_the_block_ends(tmp_path):
    target = tmp_path / "f.json"
    target.write_text("old")
    with replacing(target) as tmp:
        tmp.write_text("new")
        assert target.read_text() == "old" and tmp.parent == tmp_path  # a sibling: the rename stays on one file system
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "f.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt), replacing(target) as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_the_replaced_file_keeps_its_permissions_and_a_new_one_gets_the_umasks(tmp_path):
    old, new = tmp_path / "shared.md", tmp_path / "new.json"
    old.write_text("old")
    old.chmod(0o664)
    with replacing(old) as tmp:
        tmp.write_text("new")
    with replacing(new) as tmp:
        tmp.write_text("new")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(old.stat().st_mode) == 0o664 and stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask


def test_unwritable_says_why_a_file_could_not_be_replaced(tmp_path, monkeypatch):

    assert unwritable(tmp_path / "new" / "deeper" / "t.md") is None  # folders to be made: asked of the nearest one
    (tmp_path / "dir.md").mkdir()
    assert unwritable(tmp_path / "dir.md") == f"{tmp_path / 'dir.md'} is a folder, where a file is to be written"
    (tmp_path / "afile").write_text("mine")
    assert unwritable(tmp_path / "afile" / "sub" / "t.md") == f"{tmp_path / 'afile'} is a file, not a folder"
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access  # root may write anywhere: the folder as an ordinary user would see it
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != locked and real(path, mode, **kw))
    assert unwritable(locked / "t.md") == f"{locked} is not writable (permission denied)"
