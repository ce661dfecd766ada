"""The run directory's lock: held by one process, shared by DDP ranks, and never a removed file's."""

from __future__ import annotations

import fcntl
import os

import pytest

from ablate.run import run_lock
from ablate.run.run_lock import lock_run_dir, run_dir_in_use, unlock_run_dir


def test_the_lock_holds_out_a_second_opener_until_released(tmp_path):
    assert run_dir_in_use(tmp_path) is False
    fd = lock_run_dir(tmp_path)
    try:
        assert (tmp_path / ".run.lock").read_text() == str(os.getpid())
        assert run_dir_in_use(tmp_path) is True
        with pytest.raises(ValueError, match=f"out_dir={tmp_path} is in use by another training process \\(pid {os.getpid()}\\)"):
            lock_run_dir(tmp_path)
    finally:
        os.close(fd)
    assert run_dir_in_use(tmp_path) is False
    os.close(lock_run_dir(tmp_path))  # free again once the holder closes it


@pytest.mark.parametrize("var", ["LOCAL_RANK", "NODE_RANK"])
def test_ranks_other_than_zero_share_rank_zeros_lock(tmp_path, monkeypatch, var):
    monkeypatch.setenv(var, "1")
    assert lock_run_dir(tmp_path) is None and not (tmp_path / ".run.lock").exists()


def test_a_lock_file_its_holder_removed_while_this_opener_waited_is_opened_anew(tmp_path, monkeypatch):
    """A refused claim removes the lock file it made, then lets go: an opener that opened that file just before
    took a lock on a file no longer there, and a third process, creating the file anew, trained beside it."""
    holder = lock_run_dir(tmp_path)
    flock, calls = fcntl.flock, []

    def holder_leaves_first(fd, op):
        if not calls:  # the holder's cleanup lands between this opener's open and its flock
            (tmp_path / ".run.lock").unlink()
            unlock_run_dir(holder)
        calls.append(fd)
        return flock(fd, op)

    monkeypatch.setattr(run_lock.fcntl, "flock", holder_leaves_first)
    fd = lock_run_dir(tmp_path)
    try:
        assert len(calls) == 2 and os.path.samestat(os.fstat(fd), os.stat(tmp_path / ".run.lock"))
    finally:
        unlock_run_dir(fd)
