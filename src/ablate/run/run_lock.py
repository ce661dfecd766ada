"""The run directory's lock: one training process at a time in an out_dir, the lock ending with its process (kill -9
included), so no stale lock is ever left to clear by hand."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ablate.files import held_locks

RUN_LOCK = ".run.lock"  # held by the process training in the folder (lock_run_dir)


def other_rank() -> bool:
    """Whether this process is a DDP rank launched by rank 0 of the same run (which owns the run directory)."""
    return os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("NODE_RANK", "0") != "0"


def lock_run_dir(out: Path) -> int | None:
    """Hold out_dir for this process: a second `ablate train` on it (or a sweep continuing a trial whose first
    process still runs) is refused instead of interleaving checkpoints. The lock dies with the process, kill -9
    included. Returns the descriptor to close when done; DDP ranks other than 0 share rank 0's lock."""
    if other_rank():
        return None
    while True:  # a lock file removed by its holder (a refused or untouched run's cleanup) is no lock: open it anew
        fd = os.open(out / RUN_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ValueError(f"out_dir={out} is in use by another training process (pid {holder}); wait for it to end or stop it") from None
        if _names(out / RUN_LOCK, fd):
            break
        os.close(fd)
    held_locks.hold(fd)  # a forked DataLoader worker closes it: the lock ends with this process, kill -9 included
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def _names(path: Path, fd: int) -> bool:
    """Whether `path` still names the file open as `fd`."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except FileNotFoundError:
        return False


def unlock_run_dir(fd: int | None) -> None:
    """Release lock_run_dir's lock (None: there was none)."""
    if fd is not None:
        held_locks.release(fd)
        os.close(fd)


def run_dir_in_use(out: Path) -> bool:
    try:
        fd = lock_run_dir(out)
    except ValueError:
        return True
    unlock_run_dir(fd)
    return False
