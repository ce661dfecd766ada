"""A study's SQLite file under faults, for ablate.sweep.storage: damage found before anything writes to it, a full disk
or damage met by any later statement said as such and naming the file (Optuna's own message, "... e.g. exceeding max
length", says neither), and the first creation of a study's tables kept to one process at a time.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy

from ablate.files.atomic import DiskFull

# SQLite's primary result codes (sqlite3 names them from Python 3.11 only).
_READONLY, _CORRUPT, _FULL, _NOTADB = 8, 11, 13, 26
_watched: set[str] = set()  # the files whose statements `_said_plainly` words; other SQLite engines are left alone


class DamagedStudy(ValueError):
    """A study's storage holds bytes that are not what its format says; nothing was written into it."""


def sqlite_file(url: str) -> Path | None:
    """The file of a sqlite:///PATH URL; None for other URLs and for SQLite in memory."""
    if not url.startswith("sqlite"):
        return None
    database = sqlalchemy.engine.make_url(url).database
    return Path(database) if database and database != ":memory:" else None


def in_memory(url: str) -> bool:
    """Whether `url` is SQLite held in memory (no file, ':memory:', mode=memory): each process opening it gets its own
    empty database, so a sweep's workers would never see the trials its parent queued."""
    if not url.startswith("sqlite"):
        return False
    return sqlite_file(url) is None or sqlalchemy.engine.make_url(url).query.get("mode") == "memory"


def sqlite_url(path: Path) -> str:
    """The sqlite:/// URL of `path`, which `sqlite_file` reads back as `path`: a '?' in a folder's name would start
    the URL's query (the study in a file named for what precedes it), a '%' be decoded ('a%231' read 'a#1') and a
    '{' or '}' be taken by Optuna for a placeholder of its own (a KeyError), so such a path is percent-encoded; any
    other is written as it is, as ablate always wrote it."""
    plain = f"sqlite:///{path}"
    if sqlite_file(plain) == path and not {"{", "}"} & set(plain):
        return plain
    return sqlalchemy.engine.URL.create("sqlite", database=str(path)).render_as_string(hide_password=False)


def damaged(path: Path, reason: str, kept: str = "nothing was written to it") -> DamagedStudy:
    return DamagedStudy(f"damaged study database: {path} ({reason}); restore it from a backup or move it aside ({kept})")


def check_database(path: Path) -> None:
    """Raise DamagedStudy when `path` is not a sound SQLite database (SQLite's quick_check, a few ms for a study's
    size), reading only. A missing or empty file is a new study, unless the sweep's trials/ folder beside it holds runs
    (the file was cut, and starting over would run its rows again over them); a file that is busy or cannot be opened
    at all is left to the open that follows, which says so."""
    if not path.is_file():
        return
    if path.stat().st_size == 0:
        trials = path.parent / "trials"
        if trials.is_dir() and any(trials.iterdir()):
            raise damaged(path, f"the file is empty, but {trials} holds the runs of the study it recorded")
        return
    try:
        try:
            problem = _quick_check(path, "ro")
        except sqlite3.Error as e:
            if _primary(e) != _READONLY:
                raise
            # A hot journal left by a crash, which only a writer may roll back (as SQLite does on any open).
            problem = _quick_check(path, "rw")
    except sqlite3.Error as e:
        if _primary(e) not in (_CORRUPT, _NOTADB):
            return
        problem = str(e)
    if problem is not None:
        raise damaged(path, problem)


@contextlib.contextmanager
def study_lock(path: Path, suffix: str = ".lock") -> Iterator[None]:
    """The file lock beside the database (beside a journal: its claim lock, `suffix` ".claim"), held by one process at a
    time: while it creates the study's tables (two at once clash on them: "UNIQUE constraint failed: alembic_version")
    or claims a queued trial (ablate.sweep.storage). A folder that does not exist takes no lock; SQLite then says it
    cannot open the file."""
    if not path.parent.is_dir():
        yield
        return
    try:
        f = open(f"{path}{suffix}", "a")  # noqa: SIM115 (closed below, after the lock is let go)
    except OSError as e:  # a read-only mount, a folder this user cannot write: said of the study, not of the lock file
        raise PermissionError(
            e.errno, f"cannot write beside the study's file {path} ({e.strerror}): its folder's permissions, or a read-only mount"
        ) from None
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def watch(path: Path) -> None:
    """Word SQLite's full disk and damage plainly for every statement on `path`, from the engine's first one (creating
    the tables) on."""
    _watched.add(str(path))


def check_tables(path: Path) -> None:
    """Raise DamagedStudy unless the SQLite file at `path` holds Optuna's tables (another program's database, read by
    `ablate status`, is named, never given them)."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
    try:
        found = con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='studies'").fetchone()
    finally:
        con.close()
    if found is None:
        raise damaged(path, "it holds no Optuna study tables (a database of another kind, or one no sweep has written to)")


def _quick_check(path: Path, mode: str) -> str | None:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True, timeout=60)
    try:
        rows = con.execute("PRAGMA quick_check").fetchall()
    finally:
        con.close()
    return None if rows == [("ok",)] else "; ".join(str(row[0]).splitlines()[0] for row in rows[:3])


def _primary(e: sqlite3.Error) -> int | None:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    text = str(e)  # Python 3.10: only the message tells
    return _NOTADB if "not a database" in text else _CORRUPT if "malformed" in text else _FULL if "is full" in text else None


@sqlalchemy.event.listens_for(sqlalchemy.engine.Engine, "handle_error")
def _said_plainly(context) -> None:
    """Replace SQLAlchemy's error (which Optuna wraps as "... e.g. exceeding max length") for a watched study file."""
    error, engine = context.original_exception, context.engine
    if not isinstance(error, sqlite3.Error) or engine is None or engine.url.database not in _watched:
        return
    path = Path(engine.url.database)
    if _primary(error) == _FULL:
        full = DiskFull(f"disk full: could not write the study database {path} ({error}); the study is as it was before this write")
        full.errno = errno.ENOSPC
        raise full
    if _primary(error) in (_CORRUPT, _NOTADB):
        raise damaged(path, str(error).splitlines()[0], kept="this write was not made")
    if _primary(error) == _READONLY:  # Optuna's words were "invalid data in the commit, e.g. exceeding max length"
        raise PermissionError(
            errno.EACCES,
            f"cannot write the study database {path} (read-only: its permissions, or a read-only mount); this write was not made",
        )
