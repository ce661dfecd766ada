"""Locks this process holds by `flock` on a descriptor (a run directory's, ablate.run.rundir), which a child made by
fork alone, without exec (a DataLoader's worker), must not keep: flock belongs to the open file description, which a
fork shares, so after a `kill -9` of `ablate train` its orphaned workers held the run for seconds and an immediate
`--resume` was refused, naming the dead pid. Every forked child closes them as it starts (os.register_at_fork), so
the lock dies with the process that took it. Exec'd children never see them (Python's descriptors are
non-inheritable)."""

from __future__ import annotations

import os

_HELD: dict[int, tuple[int, int]] = {}  # descriptor -> (device, inode) of the file it was opened on


def hold(fd: int) -> None:
    """`fd` holds a lock no forked child may keep."""
    st = os.fstat(fd)
    _HELD[fd] = (st.st_dev, st.st_ino)


def release(fd: int) -> None:
    """`fd` is about to close (or no longer holds the lock); not closing it is the caller's."""
    _HELD.pop(fd, None)


def close_in_child() -> None:
    """In a forked child: close each held descriptor that still names the file it was held on (one closed without
    release() and reused for another file is left alone)."""
    for fd, identity in list(_HELD.items()):
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == identity:
                os.close(fd)
        except OSError:
            pass
    _HELD.clear()


os.register_at_fork(after_in_child=close_in_child)
