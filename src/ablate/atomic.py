"""Files replaced whole or not at all: written to a temporary sibling, then renamed over the target, so a reader,
a kill or a full disk never leaves half a file where a good one was."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once, at import (single-threaded): a new file gets the mode open() would give it


@contextmanager
def replacing(target: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside `target` (same file system, so the rename is atomic) for the caller to write; it
    replaces `target` when the block ends, and is removed instead if the block raises. The result keeps the
    target's permissions (a new file: the umask's), not mkstemp's private 0600."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_UMASK
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unwritable(target: str | os.PathLike) -> str | None:
    """Why `target` could not be replaced, asked before work whose results it is to hold: a folder stands there,
    or the nearest folder above it that exists is a file or one this process may not write in; None if it can."""
    target = Path(target)
    if target.is_dir():
        return f"{target} is a folder, where a file is to be written"
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable (permission denied)"
    return None
