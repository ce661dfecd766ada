"""`ablate table`'s files: each rendered in full before any is touched, then compared with what is there. A file
with other content is replaced only when asked (`--force`), since a table's folder may hold committed evidence; a
file with the same content is left as it is; the new and changed ones are replaced together or not at all (a rename
refused halfway puts back the ones before it)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path

from ablate.files import signals
from ablate.files.atomic import DiskFull, private_dir, replacing

WRITTEN, REPLACED, UNCHANGED = "wrote", "replaced", "unchanged"


def render(writers: dict[Path, Callable[[Path], None]]) -> dict[Path, bytes]:
    """Each target's bytes, from its writer run on a scratch file (a failing writer leaves every target untouched).
    The scratch folder is `ablate.files.atomic.private_dir`'s, named for this process, so the next table removes one
    a `kill -9` left."""
    out, scratch = {}, private_dir(Path(tempfile.gettempdir()) / "ablate-table")
    try:
        for i, (target, write) in enumerate(writers.items()):
            path = scratch / f"{i}-{target.name}"
            write(path)
            out[target] = path.read_bytes()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def states(files: dict[Path, bytes], empty: Collection[Path] = ()) -> dict[Path, str]:
    """What writing `files` would do to each: WRITTEN (new, or in `empty`: a page whose table is still to come),
    REPLACED (other content there) or UNCHANGED."""
    return {
        p: UNCHANGED if p.exists() and p.read_bytes() == data else WRITTEN if not p.exists() or p in empty else REPLACED
        for p, data in files.items()
    }


@contextlib.contextmanager
def _folders_locked(paths: Collection[Path]):
    """Another `ablate table` writing into the same folder waits here, so its check and its renames come after these
    and two never mix their files. An flock on each folder (on its nearest one that exists: no folder is made for a
    refusal, and no lock file is left); where a file system refuses flock on a folder, no lock."""
    fds = []
    try:
        for folder in sorted({p.parent for p in paths}):
            while not folder.is_dir() and folder != folder.parent:
                folder = folder.parent
            fds.append(os.open(folder, os.O_RDONLY))
            with contextlib.suppress(OSError):
                fcntl.flock(fds[-1], fcntl.LOCK_EX)
        yield
    finally:
        for fd in fds:
            os.close(fd)


def write(files: dict[Path, bytes], force: bool, empty: Collection[Path] = ()) -> dict[Path, str]:
    """Write the new and changed files, all renamed into place together (`ablate.files.atomic.replacing`); without `force`
    refuse, writing nothing, if any would replace other content. Returns `states`."""
    with _folders_locked(list(files)):
        return _write(files, force, empty)


def _write(files: dict[Path, bytes], force: bool, empty: Collection[Path]) -> dict[Path, str]:
    state = states(files, empty)
    if (changed := [str(p) for p, s in state.items() if s == REPLACED]) and not force:
        raise ValueError(
            f"{', '.join(changed)} already there with other content and would be replaced; nothing was written: "
            f"pass --force to replace {'them' if len(changed) > 1 else 'it'}, or choose another --out or --name"
        )
    todo = [p for p, s in state.items() if s != UNCHANGED]
    with contextlib.ExitStack() as stack:  # all written first, then all renamed: a failure changes none
        for p in todo:  # `replacing` makes a missing folder, and removes it again if the write fails
            stack.enter_context(replacing(p)).write_bytes(files[p])
        with signals.held():  # nor a signal: one that comes while they are renamed acts after the last
            old = _keep(todo)
            try:
                stack.pop_all().close()
            except OSError as e:  # one rename refused (a file another user owns in a shared folder): the others undone
                _put_back(old)
                if isinstance(e, DiskFull) or not (where := e.filename2 or e.filename):
                    raise
                raise ValueError(f"{where} could not be replaced ({e.strerror or e}); the table's files are as they were") from None
            finally:
                for copy in old.values():
                    if copy is not None:
                        copy.unlink(missing_ok=True)
    return state


def _keep(paths: list[Path]) -> dict[Path, Path | None]:
    """A copy of each file there now (a hard link, else a copy; None where none is), to put back if a rename fails."""
    out: dict[Path, Path | None] = {}
    for p in paths:
        out[p] = None
        if p.exists():
            out[p] = p.with_name(f".{p.name}.{os.getpid()}.old")
            try:
                os.link(p, out[p])
            except OSError:  # no hard links here, or a file that refuses them (immutable)
                shutil.copy2(p, out[p])
    return out


def _put_back(old: dict[Path, Path | None]) -> None:
    for p, copy in old.items():
        with contextlib.suppress(OSError):  # the file whose rename failed is as it was
            if copy is not None:
                os.replace(copy, p)
            else:
                p.unlink(missing_ok=True)  # a new file, renamed in before the failure
