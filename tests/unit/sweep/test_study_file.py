"""study_file: a sweep's study.db read without Optuna, whatever its folder is called, and a busy one named."""

from __future__ import annotations

import sqlite3

import pytest

from ablate.sweep import study_file


def write_db(folder, name: str):
    folder.mkdir(parents=True)
    con = sqlite3.connect(folder / "study.db")
    con.executescript(f"CREATE TABLE studies (study_id INTEGER, study_name TEXT); INSERT INTO studies VALUES (1, '{name}');")
    con.commit()
    con.close()
    return folder / "study.db"


@pytest.mark.parametrize("folder", ["a#1", "a?mode=rwc", "a%231", "a b"])
def test_a_folders_name_is_its_name_never_part_of_a_uri(tmp_path, folder):
    """Read by an unquoted URI, `a#1/study.db` opened (and created) a file `a` read-write, and `a%231` read `a#1`."""
    write_db(tmp_path / "a#1", "the other study")
    db = write_db(tmp_path / "x" / folder, "its own") if folder != "a#1" else tmp_path / "a#1" / "study.db"
    expected = ["the other study"] if folder == "a#1" else ["its own"]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert study_file.study_names(db) == expected
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing created beside it


def test_a_relative_path_reads(tmp_path, monkeypatch):
    write_db(tmp_path / "s", "mine")
    monkeypatch.chdir(tmp_path)
    from pathlib import Path

    assert study_file.study_names(Path("s/study.db")) == ["mine"]


@pytest.mark.parametrize("content", [b"", b"not sqlite\x00" * 100], ids=["empty", "garbage"])
def test_a_file_that_is_no_study_database_is_named(tmp_path, content):
    db = tmp_path / "study.db"
    db.write_bytes(content)
    with pytest.raises(ValueError, match="study.db: not a readable Optuna study database"):
        study_file.study_names(db)
    assert db.read_bytes() == content  # read-only: never written


@pytest.mark.timeout(30, method="thread")  # SQLite's own retries ignore a signal: a regression must not hang the suite
def test_a_database_a_worker_keeps_locked_is_given_up_on_saying_it_is_busy(tmp_path, monkeypatch):
    db = write_db(tmp_path / "s", "mine")
    monkeypatch.setattr(study_file, "BUSY_SECONDS", 0.3)
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")  # a worker writing
    try:
        with pytest.raises(ValueError, match="the study database is busy .* for over 0.3 s"):
            study_file.study_names(db)
    finally:
        lock.rollback()
        lock.close()
    assert study_file.study_names(db) == ["mine"]


def test_a_study_db_that_links_to_nothing_is_refused_by_archive_status_and_table(tmp_path, capsys):
    """Read as absent, the archive left the database out (exit 0) and status said the folder holds none."""
    from ablate.archive.study import archive
    from ablate.cli import main
    from ablate.sweep.study_file import check_present
    from ablate.table.left_out import study_trials

    study = tmp_path / "study"
    (study / "trials" / "0000-base").mkdir(parents=True)
    (study / "trials" / "0000-base" / "summary.json").write_text("{}")
    (study / "trials" / "0000-base" / "config.yaml").write_text("seed: 1\n")
    (study / "study.db").symlink_to(tmp_path / "gone.db")
    said = rf"{study / 'study.db'} is a link to {tmp_path / 'gone.db'}, which does not exist: the study's database is missing"
    for call in (lambda: check_present(study / "study.db"), lambda: archive(study, tmp_path / "arc"), lambda: study_trials(study)):
        with pytest.raises(ValueError, match=said):
            call()
    assert main(["status", str(study)]) == 2
    assert said.replace("\\", "") in capsys.readouterr().err
    assert not (tmp_path / "arc").exists()
    assert check_present(tmp_path / "none.db") is False
