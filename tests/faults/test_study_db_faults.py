"""Issue 32 item 3: the study's storage under faults.

SQLite: a study.db with damaged bytes, and a full disk during a write, ended in Optuna's traceback "... e.g. exceeding
max length"; a damaged one could be written into. Now `ablate sweep` and `ablate status` say "damaged study database:
FILE (...)" and write nothing into it, and a full disk is "disk full: could not write the study database FILE".
Journal: a journal whose last line is damaged was appended to (gluing the sweep's operation onto the damage, so every
later read failed), and an append cut short by a full disk left half a line; now neither writes anything into it.
A full disk is made by SQLite's max_page_count (what SQLite says when a disk is full), by a real tmpfs a few pages
large where user namespaces allow mounting one, and by tests/full_disk.py for the journal's writes.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from full_disk import FullDisk
from helpers import TINY_TRAIN, run_cli, sweep_writer
from optuna.storages.journal import JournalFileBackend, JournalStorage

from ablate.sweep.journal import check_journal
from ablate.sweep.load import load_sweep
from ablate.sweep.storage import storage_url
from ablate.sweep.worker import open_sweep_study

VARIANTS = {"base": {}, "A-h1": {"model.heads": 1}}


@pytest.fixture(autouse=True)
def _no_storage_from_env(monkeypatch):
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)


def sweep_file(tmp_path: Path, **fields) -> Path:
    return sweep_writer(tmp_path, TINY_TRAIN)(name="demo", variants=VARIANTS, **fields)


def open_study(path: Path) -> optuna.Study:
    sweep = load_sweep(path)
    return open_sweep_study(sweep, storage_url(sweep.out_dir, sweep.storage)).study


def study_db(tmp_path: Path) -> tuple[Path, Path]:
    """(sweep file, study.db) of a study with two finished trials, as a sweep leaves it."""
    path = sweep_file(tmp_path)
    study = open_study(path)
    for value in (1.0, 2.0):
        trial = study.ask()
        trial.set_user_attr("name", f"row-{value}")
        study.tell(trial, value)
    return path, tmp_path / "sweep" / "study.db"


def root_page(db: Path, table: str) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    finally:
        con.close()


def damage(db: Path, kind: str) -> None:
    data = db.read_bytes()
    if kind == "not a database":
        db.write_bytes(b"this is a note, not a database\n" * 100)
    elif kind == "truncated":
        db.write_bytes(data[: len(data) // 3])
    else:  # the header of the trials table's first page overwritten: SQLite opens the file, reading the table fails
        page = root_page(db, "trials")
        start = (page - 1) * 4096
        db.write_bytes(data[:start] + b"\xff" * 12 + data[start + 12 :])


@pytest.mark.parametrize("kind", ["not a database", "truncated", "damaged page"])
def test_a_damaged_study_db_is_refused_by_sweep_and_status_naming_it_and_never_written(tmp_path, capsys, kind):
    path, db = study_db(tmp_path)
    damage(db, kind)
    before, mtime = db.read_bytes(), db.stat().st_mtime_ns
    for command in (["sweep", str(path)], ["status", str(db.parent)], ["status", str(path)]):
        rc, out = run_cli(capsys, *command)
        assert rc == 2, out
        assert f"damaged study database: {db} (" in out, out
        assert "restore it from a backup or move it aside" in out
        assert "Traceback" not in out and "exceeding max length" not in out
        assert db.read_bytes() == before and db.stat().st_mtime_ns == mtime  # nothing written into it
    assert not Path(f"{db}-journal").exists()


@pytest.mark.slow  # a subprocess importing torch: seconds; the default set stays under a minute
def test_a_sweep_worker_process_says_the_study_is_damaged_once_without_a_traceback(tmp_path):
    """A worker is a process of its own (--workers N, or a terminal's live view), meeting a fault on its own."""
    path, db = study_db(tmp_path)
    damage(db, "damaged page")
    before = db.read_bytes()
    env = {**os.environ, "ABLATE_SWEEP_STORAGE": f"sqlite:///{db}"}
    proc = subprocess.run([sys.executable, "-m", "ablate.sweep.worker", str(path), "0", "0"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("[worker 0] error: cannot open the study 'demo' at sqlite:///")
    assert f": damaged study database: {db} (" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert db.read_bytes() == before


def test_a_study_db_damaged_while_a_sweep_runs_is_named_at_the_next_statement_that_meets_the_damage(tmp_path):
    path, db = study_db(tmp_path)
    study = open_study(path)
    damage(db, "damaged page")
    data = bytearray(db.read_bytes())
    data[24:28] = (int.from_bytes(data[24:28], "big") + 1).to_bytes(4, "big")  # SQLite's change counter: its readers re-read the file
    db.write_bytes(bytes(data))
    with pytest.raises(
        ValueError, match=rf"^damaged study database: {db} \(database disk image is malformed\); .*\(this write was not made\)"
    ):
        study.tell(study.ask(), 3.0)
    assert db.read_bytes() == bytes(data)


def limit_pages(db: Path, pages: int | None = None):
    """Every new SQLAlchemy connection to `db` may grow it to `pages` pages (None: no more than it has): SQLite then
    fails a write that needs more with SQLITE_FULL, "database or disk is full", as on a full disk. Returns the
    listener, for sqlalchemy.event.remove."""

    def on_connect(dbapi_connection, record):
        if any(Path(file) == db for _, name, file in dbapi_connection.execute("PRAGMA database_list") if name == "main"):
            count = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
            dbapi_connection.execute(f"PRAGMA max_page_count = {pages if pages is not None else count}")

    sqlalchemy.event.listen(sqlalchemy.pool.Pool, "connect", on_connect)
    return on_connect


def test_a_full_disk_while_the_sweep_creates_its_study_says_so_and_a_later_sweep_opens_it(tmp_path, capsys):
    path = sweep_file(tmp_path)
    db = tmp_path / "sweep" / "study.db"
    listener = limit_pages(db, 6)
    try:
        rc, out = run_cli(capsys, "sweep", str(path))
    finally:
        sqlalchemy.event.remove(sqlalchemy.pool.Pool, "connect", listener)
    assert rc == 2, out
    assert f"disk full: could not write the study database {db} (database or disk is full)" in out, out
    assert "Traceback" not in out and "exceeding max length" not in out
    assert open_study(path).study_name == "demo"  # room again: the next sweep opens (creates) the study


def test_a_full_disk_during_a_write_to_a_running_study_names_the_database_and_keeps_what_it_had(tmp_path):
    path, db = study_db(tmp_path)
    listener = limit_pages(db)  # the disk is full: the file may not grow
    try:
        study = open_study(path)
        with pytest.raises(OSError, match=rf"^disk full: could not write the study database {db} \(database or disk is full\)"):
            for i in range(200):  # each trial's attribute fills most of a page
                trial = study.ask()
                trial.set_user_attr("notes", f"{i}" * 3000)
                study.tell(trial, float(i))
    finally:
        sqlalchemy.event.remove(sqlalchemy.pool.Pool, "connect", listener)
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert con.execute("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0] >= 2
    finally:
        con.close()


def can_mount_tmpfs() -> str | None:
    """Why a tmpfs cannot be mounted in a user namespace here (None: it can)."""
    if shutil.which("unshare") is None:
        return "no unshare command"
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /tmp"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"cannot mount a tmpfs in a user namespace: {probe.stderr.strip()[:200]}"


@pytest.mark.slow  # a real `ablate sweep` process
def test_a_real_full_disk_under_the_study_database_ends_ablate_sweep_with_disk_full(tmp_path):
    """The study exists; the disk it is on has no room left when the sweep queues its rows."""
    if why := can_mount_tmpfs():
        pytest.skip(why)
    path, db = study_db(tmp_path)
    small = tmp_path / "small"
    small.mkdir()
    path = sweep_file(tmp_path, storage=f"sqlite:///{small}/study.db")
    fill = f'mount -t tmpfs -o size=512k tmpfs {small} && cp {db} {small} && (cat /dev/zero > {small}/filler 2>/dev/null; exec "$@")'
    proc = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", fill, "sh", sys.executable, "-m", "ablate.cli", "sweep", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"ablate sweep: error: disk full: could not write the study database {small}/study.db (database or disk is full)" in proc.stderr
    assert "Traceback" not in proc.stderr


def journal_study(tmp_path: Path) -> tuple[Path, optuna.Study]:
    """A journal-file study with a finished trial, open."""
    log = tmp_path / "shared" / "study.log"
    study = open_study(sweep_file(tmp_path, storage=f"journal://{log}"))
    study.tell(study.ask(), 1.0)
    return log, study


def test_a_journal_whose_last_line_is_torn_is_refused_naming_the_line_and_not_appended_to(tmp_path):
    log, _ = journal_study(tmp_path)
    lines = check_journal(log)
    with open(log, "ab") as f:
        f.write(b'{"op_code": 6, "worker_id": "x", "tri')  # a write cut off by a crash or a full disk: no writer holds the lock
    before = log.read_bytes()
    with pytest.raises(ValueError, match=rf"study\.log, line {lines + 1}: damaged study journal \(its last line is incomplete"):
        open_study(tmp_path / "sweep.yaml")  # opening an existing study logs an operation
    assert log.read_bytes() == before


def test_a_journal_whose_last_line_is_damaged_while_a_sweep_runs_is_not_appended_to(tmp_path):
    log, study = journal_study(tmp_path)
    data = log.read_bytes()
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    log.write_bytes(data[: len(data) - len(last) - 1] + b"\x00" * len(last) + b"\n")  # zeroed by a file system check, say
    before, number = log.read_bytes(), data.count(b"\n")
    with pytest.raises(ValueError, match=rf"study\.log, line {number}: damaged study journal"):
        study.tell(study.ask(), 2.0)
    assert log.read_bytes() == before


def test_a_full_disk_during_a_journal_append_leaves_the_journal_as_it_was(tmp_path, monkeypatch):
    log, study = journal_study(tmp_path)
    before = log.read_bytes()
    FullDisk(log.parent, room=40).install(monkeypatch)  # room for part of the next line
    with pytest.raises(OSError, match=rf"^disk full: could not write {log} \(No space left on device\)"):
        study.ask()
    monkeypatch.undo()  # room again
    assert log.read_bytes() == before
    study.tell(study.ask(), 3.0)
    reread = JournalStorage(JournalFileBackend(str(log)))
    assert [t.value for t in reread.get_all_trials(0)] == [1.0, 3.0]


def test_a_sweep_whose_storage_cannot_be_reached_leaves_no_folder_it_made(tmp_path, capsys):
    """The out_dir (and its parents) was made before the storage was opened, and left empty when that failed."""
    path = sweep_file(tmp_path, out_dir=str(tmp_path / "new" / "sweep"), storage="postgresql+psycopg2://u:p@127.0.0.1:5999/db")
    rc, out = run_cli(capsys, "sweep", str(path))
    assert rc == 2 and "could not be reached" in out, out
    assert not (tmp_path / "new").exists()
