"""A lock held on a descriptor is closed in every child made by fork alone (a DataLoader's worker), so it ends with
the process that took it: after `kill -9` of `ablate train` its orphaned workers held the run for seconds."""

from __future__ import annotations

import fcntl
import os
import time

from helpers import lock_free

from ablate.files import held_locks


def lock(path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def fork_and_close(fd: int, path) -> bool:
    """Fork a child that lives on (as an orphaned worker does), close the parent's descriptor: whether the lock is free."""
    ready, started = os.pipe()
    child = os.fork()
    if child == 0:
        os.write(started, b"x")  # fork's hooks have run
        time.sleep(5)
        os._exit(0)
    try:
        os.read(ready, 1)
        os.close(fd)
        return lock_free(path)
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)
        os.close(ready)
        os.close(started)


def test_a_forked_child_does_not_keep_a_held_lock(tmp_path):
    path = tmp_path / ".run.lock"
    fd = lock(path)
    held_locks.hold(fd)
    try:
        assert fork_and_close(fd, path)
    finally:
        held_locks.release(fd)
    unheld = lock(path)
    assert not fork_and_close(unheld, path)  # without hold(), the child shares the lock: what a worker did


def test_a_released_descriptor_reused_for_another_file_is_left_open_in_the_child(tmp_path):
    fd = lock(tmp_path / "a.lock")
    held_locks.hold(fd)
    os.close(fd)  # closed without release(), and its number taken by another file
    other = os.open(tmp_path / "b", os.O_RDWR | os.O_CREAT)
    if other != fd:  # the lowest free number is usually the same one
        os.dup2(other, fd)
        os.close(other)
    try:
        held_locks.close_in_child()
        os.fstat(fd)  # still open
    finally:
        os.close(fd)
