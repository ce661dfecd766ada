"""An archive written whole or not at all: into a temporary folder beside DEST (same file system), moved into place
at the end; on any failure (a full disk, a refusal, Ctrl-C or SIGTERM) the temporary folder goes and DEST is as it
was. A new DEST is one rename. An existing one (an archive updated) gets the staged files moved in, the database
last, under the marker ARCHIVE_INCOMPLETE, which `ablate table` refuses and the move's end removes: a process killed
between two moves leaves an archive that says it is unfinished, never one that tabulates; Ctrl-C or SIGTERM there
waits for the last move. A kill -9 leaves a
temporary folder whose writer is gone: the next archive into DEST from the same host removes it (its name holds the
host: another host's live one is not this host's to judge). One archive writes into DEST at a time (`exclusive`)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ablate.archive.study_db import DATABASE
from ablate.files import signals
from ablate.files.atomic import HOST_TAG, DiskFull, missing_folders, process_alive, remove_empty
from ablate.files.destination import ARCHIVE_INCOMPLETE


def _stage_name(dest: Path, pid: int | str) -> str:
    return f".{dest.name}.archive-{HOST_TAG}-{pid}.tmp"


@contextlib.contextmanager
def exclusive(dest: Path) -> Iterator[bool]:
    """One `ablate archive` into `dest` at a time, from any host that shares the folder: two at once each passed the
    check that the study's database holds every trial the archive's does, and the one that ended last moved its older
    database in over the other's newer one (a finished trial lost). An flock on `.DEST.archive.lock` beside it, taken
    before that check; a second archive is refused, naming DEST. The file goes at the end, so none is left beside an
    archive (a study folder is often committed): that costs `_locked` a check that it holds the file still there.
    Yields whether the lock was taken (not on a file system without locks). The folders it had to make for DEST go
    again if the archive fails."""
    made = missing_folders(dest.parent)
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock = dest.parent / f".{dest.name}.archive.lock"
    try:
        fd, locked = _locked(lock, dest)
        try:
            yield locked
        finally:
            with contextlib.suppress(OSError):
                lock.unlink()
            os.close(fd)
    except BaseException:
        remove_empty(made)
        raise


def _locked(lock: Path, dest: Path) -> tuple[int, bool]:
    while True:
        try:  # 0o666 less the umask: a lock file a killed archive left is another group member's to take
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:  # another user's (live, or left by a kill): an flock needs no write access to it
            fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ValueError(
                f"another `ablate archive` is writing {dest} (it holds {lock}); run this one when it has ended; nothing was written"
            ) from None
        except OSError:  # a file system without locks (an NFS mount with nolock): go on unlocked, as before
            return fd, False
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(fd), os.stat(lock)):
                return fd, True
        os.close(fd)  # the holder before us removed the file we locked: lock the one there now


@contextlib.contextmanager
def staging(dest: Path, sole: bool = False) -> Iterator[Path]:
    """A temporary folder to write the archive into; moved into `dest` when the block ends, removed if it raises.
    Inside `exclusive(dest)`, which made dest's folder; `sole`: it holds the lock, so no other archive writes one."""
    _remove_stale(dest, sole)
    stage = dest.parent / _stage_name(dest, os.getpid())
    stage.mkdir()
    try:
        try:
            yield stage
        except DiskFull as e:  # named as the archive, not its temporary folder, which is gone
            full = DiskFull(f"{str(e).replace(str(stage), str(dest))}; nothing of the archive was left")
            full.errno = e.errno
            raise full from None
        with signals.held():  # a signal while the files move in acts once they all are: never half an update
            _move_in(stage, dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def _move_in(stage: Path, dest: Path) -> None:
    if not dest.exists() or (dest.is_dir() and not any(dest.iterdir())):
        try:
            os.replace(stage, dest)  # a new (or empty) DEST: one rename
            return
        except OSError as e:  # DEST a mount point (a bind mount, a volume): moved in file by file, below
            if e.errno not in (errno.EXDEV, errno.EBUSY):
                raise
    marker = dest / ARCHIVE_INCOMPLETE
    marker.touch()
    files = sorted((p for p in stage.rglob("*") if p.is_file()), key=lambda p: (p == stage / DATABASE, str(p)))
    for path in files:
        target = dest / path.relative_to(stage)
        target.parent.mkdir(parents=True, exist_ok=True)
        _place(path, target)
    marker.unlink()
    shutil.rmtree(stage, ignore_errors=True)


def _place(path: Path, target: Path) -> None:
    """Rename `path` to `target`; onto another file system (DEST a mount point, the stage beside it on its parent's:
    the archive stayed marked incomplete, each rerun failing alike) copied beside `target` first, then renamed."""
    try:
        os.replace(path, target)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        near = target.with_name(f".{target.name}.{HOST_TAG}-{os.getpid()}.tmp")
        try:
            shutil.copy2(path, near)
            os.replace(near, target)
        finally:
            near.unlink(missing_ok=True)


def _remove_stale(dest: Path, sole: bool) -> None:
    """Temporary folders of archives into `dest` killed before they could clean up: every one when this archive holds
    DEST's lock (`sole`: only the lock's holder writes one), else this host's whose process is gone."""
    mine = _stage_name(dest, "")[: -len(".tmp")]  # .DEST.archive-HOST-
    for old in dest.parent.glob(glob.escape(f".{dest.name}.archive-") + "*.tmp"):
        pid = old.name[len(mine) : -len(".tmp")] if old.name.startswith(mine) else ""
        if sole or (pid.isdigit() and not process_alive(int(pid))):
            shutil.rmtree(old, ignore_errors=True)
