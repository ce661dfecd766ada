"""A sweep's SQLite study file (study.db) read without Optuna: by the checks before a sweep writes, `ablate table` and
`ablate archive`. Read-only, by a quoted file URI: unquoted, a '#' or '?' in a folder's name ends the path (`a#1/study.db`
opened, and created, a file `a` read-write) and a '%' is decoded (`a%231` read `a#1`'s). A running worker's write lock
is waited on for at most BUSY_SECONDS (SQLite would retry forever, deaf to Ctrl-C), then named."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

BUSY_SECONDS = 30.0  # how long to wait for a worker's write lock on a database before giving up

# SQLite's result codes for a lock held elsewhere (the module names them from Python 3.11, which also sets an
# error's sqlite_errorcode; before that only the message tells).
BUSY = (getattr(sqlite3, "SQLITE_BUSY", 5), getattr(sqlite3, "SQLITE_LOCKED", 6))


def connect(db: Path, read_only: bool = True) -> sqlite3.Connection:
    """A connection that waits at most a second for a lock per attempt (the callers set the overall deadline)."""
    if read_only:
        return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=min(1.0, BUSY_SECONDS))
    return sqlite3.connect(db, timeout=min(1.0, BUSY_SECONDS))


def is_busy(e: sqlite3.Error) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    return code in BUSY if code is not None else "locked" in str(e) or "busy" in str(e)


def busy_error(db: Path) -> ValueError:
    return ValueError(
        f"{db}: the study database is busy (a running worker holds a write lock on it) for over {BUSY_SECONDS:g} s; "
        "try again in a moment, or when the sweep's workers are idle"
    )


def read(db: Path, query: str) -> list[tuple]:
    """`query`'s rows, read-only; a ValueError for a file that is no such database, or one locked past BUSY_SECONDS."""
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            with contextlib.closing(connect(db)) as con:
                return con.execute(query).fetchall()
        except sqlite3.Error as e:
            if not is_busy(e):
                raise ValueError(f"{db}: not a readable Optuna study database ({e})") from None
            if time.monotonic() > deadline:
                raise busy_error(db) from None


def study_names(db: Path) -> list[str]:
    """The studies an Optuna SQLite database holds, in the order they began (a ValueError as `read`'s)."""
    return [str(name) for (name,) in read(db, "SELECT study_name FROM studies ORDER BY study_id")]


def check_present(db: Path) -> bool:
    """Whether the study has its database; a ValueError for one that is a link to nothing, which read as absent: the
    archive left the database out, exit 0, and status said the folder holds none."""
    if db.is_symlink() and not db.exists():
        raise ValueError(
            f"{db} is a link to {os.readlink(db)}, which does not exist: the study's database is missing; restore the "
            "file it links to (or remove the link, to read the folder as runs without a study); nothing was written"
        )
    return db.is_file()
