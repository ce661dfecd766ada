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

from ablate.files.atomic import missing_folders, remove_empty, replacing
from ablate.sweep import study_file
from ablate.sweep.study_file import BUSY, busy_error, connect, is_busy, read, study_names

DATABASE = "study.db"  # the sweep's default storage (ablate.sweep.storage); a server or shared journal needs no copy


def finished_trials(db: Path) -> set[tuple[str, int, str]]:
    """(study, trial number, start time) of the COMPLETE and PRUNED trials in an Optuna SQLite database (read-only, so
    a live study is not disturbed): a trial's identity across copies of the database. Refuses a file that is no such
    database (empty, damaged or another kind), and one a worker keeps locked past BUSY_SECONDS."""
    rows = read(
        db,
        "SELECT s.study_name, t.number, t.datetime_start FROM trials t JOIN studies s ON s.study_id = t.study_id "
        "WHERE t.state IN ('COMPLETE', 'PRUNED')",
    )
    return {(name, number, str(start)) for name, number, start in rows}


def finished_run_dirs(db: Path) -> set[str] | None:
    """The folder names (trials/NAME) of the runs the database's COMPLETE and PRUNED trials trained, from each
    trial's `out_dir`; None when some such trial records none (a study older than the record), so the caller cannot
    tell and keeps every run with a summary."""
    return _run_dirs(db, "WHERE t.state IN ('COMPLETE', 'PRUNED')", strict=True)


def trial_run_dirs(db: Path) -> set[str]:
    """The folder names of every trial's run that records one, whatever its state: a folder under trials/ that none
    names was renamed, or copied in from another study."""
    return _run_dirs(db, "", strict=False) or set()


def _run_dirs(db: Path, where: str, strict: bool) -> set[str] | None:
    with contextlib.closing(connect(db)) as con:
        rows = con.execute(
            "SELECT t.trial_id, a.value_json FROM trials t LEFT JOIN trial_user_attributes a "
            f"ON a.trial_id = t.trial_id AND a.key = 'out_dir' {where}"
        ).fetchall()
    names = set()
    for _, value in rows:
        try:
            names.add(Path(json.loads(value)).name)
        except (ValueError, TypeError):  # none recorded (a queued trial; a study older than the record), or damaged
            if strict:
                return None
    return names


def check_not_older(source: Path, finished: set[tuple[str, int, str]], existing: Path) -> None:
    """Replace an archive's database only with one that holds every trial it finished (`finished`: the source's):
    not an older or empty study, nor a copy that another machine continued from the same archive (its own finished
    trials would be lost)."""
    if not existing.is_file():
        return
    if others := sorted(set(study_names(existing)) - set(study_names(source))):  # one with nothing finished yet included
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
    deadline = time.monotonic() + study_file.BUSY_SECONDS

    def progress(status: int, remaining: int, total: int) -> None:
        if status in BUSY and time.monotonic() > deadline:
            raise _Deadline

    made = missing_folders(target.parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with replacing(target) as tmp:
            try:
                with contextlib.closing(connect(source)) as src, contextlib.closing(connect(tmp, read_only=False)) as out:
                    src.backup(out, progress=progress)
            except _Deadline:
                raise busy_error(source) from None
            except sqlite3.Error as e:
                raise (busy_error(source) if is_busy(e) else ValueError(f"{source}: cannot copy the study database ({e})")) from None
            yield Path(tmp)  # the copy, which the archived runs must agree with
    except BaseException:  # a refused archive leaves no new folder behind either
        remove_empty(made)
        raise
