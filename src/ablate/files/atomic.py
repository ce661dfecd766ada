"""Files replaced whole or not at all: written to a temporary sibling, synced, then renamed over the target, so a
reader, a kill, a power cut or a full disk never leaves half a file where a good one was. Every file ablate writes
whole goes through `replacing` (or `write_file`, built on it); files that grow go through `append`.

A full disk (ENOSPC, or EDQUOT: over quota) is a `DiskFull` error naming the file, the old file left as it was."""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import os
import shutil
import socket
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ablate.files.destination import is_stream, refuse_link, same_as_fd, same_file

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once, at import (single-threaded): a new file gets the mode open() would give it
_FULL = (errno.ENOSPC, errno.EDQUOT)
# In a temporary's name with the writer's pid, so a later writer tells a dead process's leftovers from a live one's.
HOST_TAG = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]


class DiskFull(OSError):
    """No space (or quota) left while writing a file; the message says so and names the file, not the temporary."""


class Appeared(FileExistsError):
    """A file written `new_only` that another process made while this one worked: it is kept, and this one's result is not."""


@contextmanager
def replacing(target: str | os.PathLike, new_only: bool = False) -> Iterator[Path]:
    """A temporary path beside `target` (same file system, so the rename is atomic) for the caller to write; when the
    block ends it is synced to disk and renamed over `target`, and the folder synced (so the rename survives a power
    cut); if the block raises it is removed instead. The result keeps the target's permissions (a new file: the
    umask's), not mkstemp's private 0600. Its folder is made if missing. `new_only`: never over a file, not even one
    another process wrote while this one worked (checked before the work, a file there was refused without --force):
    the temporary is linked in, which fails where a file is (`Appeared`)."""
    target = Path(target)
    refuse_link(target)  # the one rule for outputs (ablate.files.destination): never through a link
    made = missing_folders(target.parent)  # removed again if nothing comes
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.{HOST_TAG}-{os.getpid()}.", suffix=".tmp")
    except OSError as e:  # no room even for an empty file (inodes)
        remove_empty(made)
        raise _disk_full(target, e) or e from None
    os.close(fd)
    try:
        yield Path(tmp)
        _fsync(tmp)
        mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_UMASK
        os.chmod(tmp, mode)
        _link(tmp, target) if new_only else os.replace(tmp, target)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        remove_empty(made)
        if full := _disk_full(target, e):
            raise full from None
        raise
    with contextlib.suppress(OSError):  # renamed already; a folder some file systems cannot sync only weakens durability
        _fsync(target.parent)


def _link(tmp: str, target: Path) -> None:
    """Put `tmp` in place as `target` only if no file is there: a hard link fails where one is, atomically (and where
    NFS retried a link that had been made, the target is already this temporary). Where the file system has no hard
    links, a check just before the rename leaves the race a few microseconds wide."""
    try:
        os.link(tmp, target)
    except OSError as e:
        if isinstance(e, FileExistsError) and same_file(tmp, target):
            os.unlink(tmp)
            return
        if target.exists():
            raise Appeared(
                f"{target} appeared while this command ran (another process wrote it) and is kept; pass --force to write "
                "over it, or choose another name; this command's result was not written"
            ) from None
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
            raise
        os.replace(tmp, target)
        return
    os.unlink(tmp)


def missing_folders(folder: Path) -> list[Path]:
    """`folder` and its parents that do not exist yet (deepest first): what a `mkdir(parents=True)` is about to make."""
    return [p for p in (folder, *folder.parents) if not p.exists()]


def remove_empty(folders: list[Path]) -> None:
    """Remove the folders a write made (deepest first) that are still empty: a failed write leaves no folder behind."""
    for folder in folders:
        with contextlib.suppress(OSError):  # not empty: another writer's files are in it
            folder.rmdir()


def remove_stale(target: str | os.PathLike) -> list[Path]:
    """Remove the temporaries of `target` that a killed process left (`.NAME.HOST-PID.XXXX.tmp`, PID gone from this
    host; a file, or a `private_dir`); another live writer's, or another host's on a shared file system, stay.
    Returns those removed."""
    target, removed = Path(target), []
    for tmp in target.parent.glob(f".{glob.escape(target.name)}.{HOST_TAG}-*.tmp"):
        pid = tmp.name[len(target.name) + len(HOST_TAG) + 3 :].split(".", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)):
            with contextlib.suppress(OSError):
                if tmp.is_dir() and not tmp.is_symlink():
                    shutil.rmtree(tmp)
                else:
                    tmp.unlink()
                removed.append(tmp)
    return removed


def private_dir(target: str | os.PathLike) -> Path:
    """A new folder beside `target` (`.NAME.HOST-PID.XXXX.tmp`) to fill and rename into place as `target`, a folder
    written whole; a killed writer's (its PID gone) are removed first, so a kill -9 leaves no folder for good. Its
    mode is the umask's, as mkdir's would be, not mkdtemp's private 0700: a shared cache's tokenizers and downloads
    were unreadable to the other users of it."""
    target = Path(target)
    remove_stale(target)
    made = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.{HOST_TAG}-{os.getpid()}.", suffix=".tmp"))
    os.chmod(made, 0o777 & ~_UMASK)
    return made


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs on this host (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def write_file(target: str | os.PathLike, data: str | bytes | Iterable[str | bytes], new_only: bool = False) -> None:
    """Replace `target` with `data` (text as UTF-8; or the parts an iterable yields, each written as it comes, so
    output of any size needs no memory) whole or not at all: the one writer of whole files. A symlink is refused,
    naming it; a pipe or device (`-o /dev/stdout`) has nothing to replace and is written into (`stream`). `new_only`
    as `replacing`."""
    parts = [data] if isinstance(data, (str, bytes)) else data
    target = Path(target)
    if is_stream(target):
        with stream(target) as f:
            for part in parts:
                f.write(_bytes(part))
        return
    with replacing(target, new_only) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            for part in parts:
                _write_all(fd, _bytes(part))
        finally:
            os.close(fd)


@contextmanager
def stream(target: str | os.PathLike) -> Iterator[BinaryIO]:
    """`target`, a stream (ablate.files.destination.is_stream), open to be written into, never truncated: this process's
    own stdout or stderr (-o /dev/stdout, stdout a file: `>> log` or `> log`) through its descriptor, where the shell's
    redirect writes (its offset, shared), after what Python has buffered for it; any other appended to. Opened "wb",
    /dev/stdout emptied `>> log` of its earlier lines, and text printed after it wrote over the output."""
    own = next((fd for fd in (1, 2) if same_as_fd(target, fd)), None)
    if own is not None:
        for f in (sys.stdout, sys.stderr):  # what Python buffered for them comes first
            with contextlib.suppress(Exception):  # a replaced one that cannot flush holds nothing of ours
                f.flush()
    with os.fdopen(os.dup(own), "wb") if own is not None else open(target, "ab") as f:
        yield f


def _bytes(part: str | bytes) -> bytes:
    return part.encode("utf-8") if isinstance(part, str) else part


def append(target: str | os.PathLike, text: str) -> None:
    """Append `text` (whole lines) to `target`, created if missing, and sync it. A failed write (a full disk) cuts the
    file back to where it ended, so it always ends on a complete line. For files with one writer (a run's metrics.csv):
    cutting back would take another writer's lines too."""
    target = Path(target)
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        end = os.fstat(fd).st_size
        try:
            _write_all(fd, text.encode("utf-8"))
            os.fsync(fd)
        except OSError as e:
            os.ftruncate(fd, end)
            if full := _disk_full(target, e, kept="it keeps the lines it had"):
                raise full from None
            raise
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # a write may land partly (a disk filling up); the next one then says why
        view = view[os.write(fd, view) :]


def _fsync(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _disk_full(target: Path, e: BaseException, kept: str = "") -> DiskFull | None:
    """A DiskFull naming `target` when `e` (or what caused it: torch.save wraps the OSError in a RuntimeError) is a full
    disk; None otherwise, and for a DiskFull already raised (for this file, or another in the same `with`)."""
    cause: BaseException | None = e
    for _ in range(8):  # the chain is short; a bound in case it loops
        if cause is None or (isinstance(cause, OSError) and cause.errno in _FULL):
            break
        cause = cause.__cause__ or cause.__context__
    else:
        cause = None
    if cause is None or isinstance(e, DiskFull):
        return None
    kept = kept or ("the old file is left as it was" if target.exists() else "no part of it was left")
    full = DiskFull(f"disk full: could not write {target} ({os.strerror(cause.errno)}); {kept}")
    full.errno = cause.errno
    return full
