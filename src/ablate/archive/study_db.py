"""The study database side of `ablate archive`: read an Optuna SQLite study's finished trials, refuse to replace an
archive's database with one that lacks any of them, and copy a live one consistently. A file that is not such a
database is refused naming it, and one a running worker keeps locked is given up on after BUSY_SECONDS (SQLite's
own backup would retry forever, deaf to Ctrl-C), saying it is busy."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from ablate.files.atomic import replacing

DATABASE = "study.db"  # the sweep's default storage (ablate.sweep.storage); a server or shared journal needs no copy
BUSY_SECONDS = 30.0  # how long to wait for a worker's write lock on a database before giving up


def _connect(db: Path, read_only: bool = True) -> sqlite3.Connection:
    """A connection that waits at most a second for a lock per attempt (the callers set the overall deadline)."""
    return sqlite3.connect(f"{db.as_uri()}?mode=ro" if read_only else db, uri=read_only, timeout=min(1.0, BUSY_SECONDS))


def _busy(db: Path) -> ValueError:
    return ValueError(
        f"{db}: the study database is busy (a running worker holds a write lock on it) for over {BUSY_SECONDS:g} s; "
        "try again in a moment, or when the sweep's workers are idle"
    )


# SQLite's result codes for a lock held elsewhere (the module names them from Python 3.11, which also sets an
# error's sqlite_errorcode; before that only the message tells).
_BUSY = (getattr(sqlite3, "SQLITE_BUSY", 5), getattr(sqlite3, "SQLITE_LOCKED", 6))


def _is_busy(e: sqlite3.Error) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    return code in _BUSY if code is not None else "locked" in str(e) or "busy" in str(e)


def finished_trials(db: Path) -> set[tuple[str, int, str]]:
    """(study, trial number, start time) of the COMPLETE and PRUNED trials in an Optuna SQLite database (read-only, so
    a live study is not disturbed): a trial's identity across copies of the database. Refuses a file that is no such
    database (empty, damaged or another kind), and one a worker keeps locked past BUSY_SECONDS."""
    rows = _read(
        db,
        "SELECT s.study_name, t.number, t.datetime_start FROM trials t JOIN studies s ON s.study_id = t.study_id "
        "WHERE t.state IN ('COMPLETE', 'PRUNED')",
    )
    return {(name, number, str(start)) for name, number, start in rows}


def study_names(db: Path) -> set[str]:
    """The studies an Optuna SQLite database holds (read-only; refused as `finished_trials` refuses)."""
    return {str(name) for (name,) in _read(db, "SELECT study_name FROM studies")}


def _read(db: Path, query: str) -> list[tuple]:
    """`query`'s rows, read-only; a ValueError for a file that is no such database, or one locked past BUSY_SECONDS."""
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            with contextlib.closing(_connect(db)) as con:
                return con.execute(query).fetchall()
        except sqlite3.Error as e:
            if not _is_busy(e):
                raise ValueError(f"{db}: not a readable Optuna study database ({e})") from None
            if time.monotonic() > deadline:
                raise _busy(db) from None


def finished_run_dirs(db: Path) -> set[str] | None:
    """The folder names (trials/NAME) of the runs the database's COMPLETE and PRUNED trials trained, from each
    trial's `out_dir`; None when some such trial records none (a study older than the record), so the caller cannot
    tell and keeps every run with a summary."""
    with contextlib.closing(_connect(db)) as con:
        rows = con.execute(
            "SELECT t.trial_id, a.value_json FROM trials t LEFT JOIN trial_user_attributes a "
            "ON a.trial_id = t.trial_id AND a.key = 'out_dir' WHERE t.state IN ('COMPLETE', 'PRUNED')"
        ).fetchall()
    if any(value is None for _, value in rows):
        return None
    names = set()
    for _, value in rows:
        try:
            names.add(Path(json.loads(value)).name)
        except (ValueError, TypeError):
            return None
    return names


def check_not_older(source: Path, finished: set[tuple[str, int, str]], existing: Path) -> None:
    """Replace an archive's database only with one that holds every trial it finished (`finished`: the source's):
    not an older or empty study, nor a copy that another machine continued from the same archive (its own finished
    trials would be lost)."""
    if not existing.is_file():
        return
    if others := sorted(study_names(existing) - study_names(source)):  # one with nothing finished yet included
        raise ValueError(
            f"{existing} holds the study {', '.join(map(repr, others))}, which the study's {source} does not "
            f"({', '.join(map(repr, sorted(study_names(source)))) or 'none'}): not replacing another study's database and "
            "runs; archive into a new folder instead"
        )
    lost = sorted(finished_trials(existing) - finished)
    if lost:
        named = ", ".join(f"{study} trial {number}" for study, number, _ in lost[:5]) + (" ..." if len(lost) > 5 else "")
        raise ValueError(
            f"{existing} holds {len(lost)} finished trials the study's {source} does not ({named}): not replacing it, "
            "which would lose them (an older study, another study, or one that another machine continued from the same "
            "archive); archive into a new folder instead"
        )


class _Deadline(Exception):
    pass


@contextlib.contextmanager
def database_copy(source: Path, target: Path) -> Iterator[Path]:
    """A consistent copy of a database that workers may be writing (SQLite's online backup), taken when the block
    starts and swapped in when it ends (removed if it raises): a busy or damaged database fails before the block
    writes anything, and no trial the copy marks finished can lack the files the block archives after it.
    SQLite retries a locked source forever (Ctrl-C too): the progress callback gives up after BUSY_SECONDS."""
    deadline = time.monotonic() + BUSY_SECONDS

    def progress(status: int, remaining: int, total: int) -> None:
        if status in _BUSY and time.monotonic() > deadline:
            raise _Deadline

    made = [d for d in (target.parent, *target.parent.parents) if not d.exists()]  # deepest first
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with replacing(target) as tmp:
            try:
                with contextlib.closing(_connect(source)) as src, contextlib.closing(_connect(tmp, read_only=False)) as out:
                    src.backup(out, progress=progress)
            except _Deadline:
                raise _busy(source) from None
            except sqlite3.Error as e:
                raise (_busy(source) if _is_busy(e) else ValueError(f"{source}: cannot copy the study database ({e})")) from None
            yield Path(tmp)  # the copy, which the archived runs must agree with
    except BaseException:  # a refused archive leaves no new folder behind either
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
