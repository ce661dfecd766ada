"""An archive written whole or not at all: into a temporary folder beside DEST (same file system), moved into place
at the end; on any failure (a full disk, a refusal, Ctrl-C or SIGTERM) the temporary folder goes and DEST is as it
was. A new DEST is one rename. An existing one (an archive updated) gets the staged files moved in, the database
last, under the marker ARCHIVE_INCOMPLETE, which `ablate table` refuses and the move's end removes: a process killed
between two moves leaves an archive that says it is unfinished, never one that tabulates; Ctrl-C or SIGTERM there
waits for the last move. A kill -9 leaves a
temporary folder whose writer is gone: the next archive into DEST removes it."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ablate.archive.study_db import DATABASE
from ablate.files import signals
from ablate.files.atomic import DiskFull, process_alive
from ablate.files.destination import ARCHIVE_INCOMPLETE


def _stage_name(dest: Path, pid: int | str) -> str:
    return f".{dest.name}.archive-{pid}.tmp"


@contextlib.contextmanager
def staging(dest: Path) -> Iterator[Path]:
    """A temporary folder to write the archive into; moved into `dest` when the block ends, removed if it raises."""
    _remove_stale(dest)
    made = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]  # deepest first
    stage = dest.parent / _stage_name(dest, os.getpid())
    stage.mkdir(parents=True)
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
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _move_in(stage: Path, dest: Path) -> None:
    if not dest.exists() or (dest.is_dir() and not any(dest.iterdir())):
        os.replace(stage, dest)  # a new (or empty) DEST: one rename
        return
    marker = dest / ARCHIVE_INCOMPLETE
    marker.touch()
    files = sorted((p for p in stage.rglob("*") if p.is_file()), key=lambda p: (p == stage / DATABASE, str(p)))
    for path in files:
        target = dest / path.relative_to(stage)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    marker.unlink()
    shutil.rmtree(stage, ignore_errors=True)


def _remove_stale(dest: Path) -> None:
    """Temporary folders of archives into `dest` whose process is gone (killed before it could clean up)."""
    for old in dest.parent.glob(_stage_name(dest, "*")) if dest.parent.is_dir() else ():
        pid = old.name[len(_stage_name(dest, "")) - 4 : -4]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
