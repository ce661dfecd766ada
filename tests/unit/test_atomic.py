"""A file is replaced whole or not at all."""

from __future__ import annotations

import pytest

from ablate.atomic import replacing


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
