"""Study storages: what URLs are accepted, what is refused (naming it, password hidden), and opening one after a crash
or while another process creates it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from sweep_files import write

from ablate.sweep.load import load_sweep
from ablate.sweep.storage import _created_once, make_storage, open_study, storage_url, unreachable


@pytest.mark.parametrize("storage", ["journal.log", "/tmp/optuna-journal.log", "redis://:pw@127.0.0.1/0"])
def test_storage_that_is_not_a_database_url_is_refused_naming_it(tmp_path, storage):
    sweep = load_sweep(write(tmp_path, f"name: s\nbase: base.yaml\nstorage: '{storage}'\nvariants: {{base: {{}}}}\n"))
    with pytest.raises(ValueError, match="neither a database URL nor a journal file") as err:
        storage_url(sweep.out_dir, sweep.storage)
    assert "pw" not in str(err.value)  # a password in the URL is redacted even here
    assert storage_url(sweep.out_dir, sweep.storage, "sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    assert storage_url(sweep.out_dir, sweep.storage, "postgresql+psycopg2://u:p@127.0.0.1/db").startswith("postgresql+psycopg2://")


def test_a_study_db_left_with_a_hot_journal_by_a_crash_is_rolled_back_not_called_damaged(tmp_path):
    """A writer killed mid-transaction leaves study.db-journal: SQLite rolls it back on the next open, as ever."""
    db = tmp_path / "study.db"
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{db}")
    study.tell(study.ask(), 1.0)
    crash = (
        "import os, sqlite3, sys\n"
        "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "con.execute('PRAGMA cache_size = 1')\n"  # spill to the file mid-transaction, as a big write does
        "con.execute('BEGIN')\n"
        "for i in range(3000):\n"
        "    con.execute('INSERT INTO study_user_attributes (study_id, key, value_json) VALUES (1, ?, ?)', (f'k{i}', 'x' * 200))\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", crash, str(db)], check=True)
    assert Path(f"{db}-journal").stat().st_size > 0
    reopened = optuna.load_study(study_name="s", storage=make_storage(f"sqlite:///{db}"))
    assert [t.value for t in reopened.get_trials()] == [1.0] and reopened.user_attrs == {}


def test_a_new_server_database_whose_tables_another_process_is_creating_is_opened_again(monkeypatch):
    """Losing the race to create Optuna's tables (a duplicate key) is retried; any other error is not."""
    import sqlalchemy.exc

    calls = []

    def opening(outcomes):
        def make():
            calls.append(1)
            outcome = outcomes.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        return make

    monkeypatch.setattr("ablate.sweep.storage.time.sleep", lambda s: None)
    lost = sqlalchemy.exc.IntegrityError("INSERT ...", {}, Exception('duplicate key value violates unique constraint "pg_type_typname"'))
    assert _created_once(opening([lost, lost, "storage"])) == "storage" and len(calls) == 3
    calls.clear()
    down = sqlalchemy.exc.OperationalError("connect", {}, Exception("connection refused"))
    with pytest.raises(sqlalchemy.exc.OperationalError):
        _created_once(opening([down, "storage"]))
    assert len(calls) == 1


def test_an_empty_study_db_is_a_new_study_unless_the_trials_beside_it_hold_runs(tmp_path):
    """A cut study.db (0 bytes) beside its sweep's trial folders lost the study's records: starting over would run its
    rows again over runs that finished; with no trials it is a new study, as SQLite makes it."""
    from ablate.sweep.sqlite_study import DamagedStudy, check_database

    db = tmp_path / "study.db"
    db.write_bytes(b"")
    check_database(db)
    (tmp_path / "trials" / "0000-base").mkdir(parents=True)
    with pytest.raises(DamagedStudy, match=rf"damaged study database: {db} \(the file is empty, but {tmp_path / 'trials'} holds the runs"):
        check_database(db)
    with pytest.raises(ValueError, match="damaged study database"):
        make_storage(f"sqlite:///{db}")
    assert db.read_bytes() == b""  # nothing written into it


@pytest.mark.parametrize("driver", ["psycopg2", "psycopg"])
def test_an_unreachable_server_is_called_unreachable_not_damaged_and_its_password_stays_out(driver):
    """Issue 38 item 10: nothing was read, so the hint says to check the host, not to restore a backup."""
    pytest.importorskip(driver)
    import optuna

    url = f"postgresql+{driver}://alice:Sup3rSecret@127.0.0.1:5999/db"  # nothing listens there
    with pytest.raises(ValueError) as e:
        open_study("x", url, "maximize", optuna.samplers.RandomSampler())
    message = str(e.value)
    assert message.startswith(f"cannot open the study 'x' at postgresql+{driver}://alice:***@127.0.0.1:5999/db: ")
    assert "could not be reached" in message and "check its host, port" in message, message
    assert "backup" not in message and "left as it is" not in message and "Sup3rSecret" not in message


def test_only_errors_before_any_connection_count_as_unreachable():
    import sqlalchemy.exc

    def error(text: str) -> Exception:
        return sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception(text))

    assert unreachable(error('connection to server at "db", port 5432 failed: Connection refused'))
    assert unreachable(error('could not translate host name "db.example" to address: Name or service not known'))
    assert not unreachable(error('FATAL:  password authentication failed for user "alice"'))
    assert not unreachable(error("database disk image is malformed"))
    assert not unreachable(sqlalchemy.exc.DatabaseError("SELECT 1", {}, Exception("could not connect")))


@pytest.mark.parametrize("folder, plain", [("a?b=1", False), ("a%231", False), ("a{b}", False), ("a#1", True), ("runs 10%", True)])
def test_a_sweeps_own_study_db_is_in_its_out_dir_whatever_the_folders_name(tmp_path, folder, plain):
    """The default sqlite:/// URL wrote the path as it is: a '?' started the URL's query (the study went into a file
    `a` beside the folder), '%23' was decoded (into `a#1`'s study) and Optuna took '{b}' for a placeholder (KeyError)."""
    out = tmp_path / folder
    url = storage_url(out)
    study = open_study("s", url, "maximize", optuna.samplers.RandomSampler(seed=0), sqlite_dir=out)
    study.study.enqueue_trial({})
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder] and (out / "study.db").is_file()
    assert (url == f"sqlite:///{out / 'study.db'}") is plain  # a path that read back was written as ablate always wrote it


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://alice:Ab{Cd}Ef@127.0.0.1:1/db",
        "postgresql+psycopg2://alice:Ab}Cd{Ef@127.0.0.1:1/db",
        "postgresql://alice@127.0.0.1:1/db?password=Ab{Cd}Ef",
        "mysql://alice:Ab{Cd}Ef@127.0.0.1:1/db",
    ],
)
def test_a_raw_brace_in_a_database_url_is_refused_before_optuna_reads_it_as_a_placeholder(url, tmp_path, monkeypatch):
    """Optuna fills the URL in with str.format: its KeyError('Cd') escaped as a traceback quoting the password's part in
    braces, from --storage, $ABLATE_SWEEP_STORAGE and the sweep file alike."""
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    for given in ({"override": url}, {"configured": url}, {}):
        if not given:
            monkeypatch.setenv("ABLATE_SWEEP_STORAGE", url)
        with pytest.raises(ValueError, match=r"raw '\{' or '\}', which Optuna reads as a placeholder; write them as %7B") as e:
            storage_url(tmp_path, **given)
        assert "Cd" not in str(e.value) and "***" in str(e.value)
    encoded = url.replace("{", "%7B").replace("}", "%7D")
    assert storage_url(tmp_path, override=encoded) == encoded


@pytest.mark.parametrize(
    "url", ["postgresql://alice:Sup3rSecretPw/db", "postgresql+psycopg2://alice:Sup3rSecretPw", "mysql://a:Sup3rSecretPw"]
)
def test_a_database_url_sqlalchemy_cannot_parse_is_refused_without_quoting_it(url, tmp_path):
    """With no '@', SQLAlchemy reads `alice:PW` as host and port: "invalid literal for int() with base 10: 'PW'"."""
    with pytest.raises(ValueError, match=r"cannot be parsed: is its host missing, or its port not a number\?") as e:
        storage_url(tmp_path, override=url)
    assert "Sup3r" not in str(e.value) and str(e.value).startswith(f"the storage URL ({url.split('://')[0]}://..., not shown")


def test_a_yaml_storage_value_cut_short_at_an_unquoted_hash_is_refused_without_the_password(tmp_path, capsys, monkeypatch):
    from ablate.cli import main

    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    path = write(tmp_path, "name: s\nbase: base.yaml\nstorage: postgresql://alice:Sup3rSecret #Pw@127.0.0.1:1/db\nvariants: {base: {}}\n")
    assert main(["status", str(path)]) == 2
    said = capsys.readouterr().err
    assert "cannot be parsed" in said and "quote a storage value that holds ' #'" in said and "Sup3r" not in said, said


def test_anything_else_a_driver_raises_on_opening_is_an_error_naming_the_storage_password_masked(monkeypatch):
    from ablate.sweep import storage

    def refuse(url, **kwargs):
        raise RuntimeError(f"cannot read {url}: Sup3rSecretPw is no good")

    monkeypatch.setattr(storage, "RDBStudyStorage", refuse)
    url = "postgresql://alice:Sup3rSecretPw@127.0.0.1:1/db"
    with pytest.raises(ValueError) as e:
        open_study("x", url, "maximize", optuna.samplers.RandomSampler())
    assert str(e.value).startswith("cannot open the study 'x' at postgresql://alice:***@127.0.0.1:1/db: RuntimeError: cannot read")
    assert "Sup3r" not in str(e.value)


@pytest.mark.parametrize("given", [["--storage=URL"], ["--storage", "URL"]])
def test_the_command_line_a_sweep_leaves_for_wb_holds_no_storage_password_however_it_was_given(given, tmp_path, monkeypatch):
    """`--storage=postgresql://bob:Open Sesame42@...` was masked before the URL was remembered, and the pattern for a
    URL in text stops at the space: the summary run's W&B files recorded the password."""
    from ablate.cli import main
    from ablate.messages import redact

    monkeypatch.setattr(redact, "_seen", set())  # a fresh process: no password seen yet
    url = "postgresql://bob:Open Sesame42@127.0.0.1:1/db"
    argv = ["sweep", str(tmp_path / "missing.yaml"), *[a.replace("URL", url) for a in given]]  # refused right after
    monkeypatch.setattr(sys, "argv", ["ablate", *argv])
    assert main(argv) == 2
    assert "Sesame" not in " ".join(sys.argv) and any("postgresql://bob:***@127.0.0.1:1/db" in a for a in sys.argv), sys.argv


@pytest.mark.parametrize(
    "url", ["sqlite:///", "sqlite://", "sqlite:///:memory:", "sqlite:///?mode=memory", "sqlite:///file:x?mode=memory&uri=true"]
)
def test_an_in_memory_sqlite_storage_is_refused_naming_why(url, tmp_path, monkeypatch):
    """Each worker process opened its own empty database: the parent's queued trials were never run, and the sweep
    ended 0 with nothing trained. From --storage, $ABLATE_SWEEP_STORAGE and the sweep file alike."""
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    for given in ({"override": url}, {"configured": url}, {}):
        if not given:
            monkeypatch.setenv("ABLATE_SWEEP_STORAGE", url)
        with pytest.raises(
            ValueError, match=r"an in-memory study cannot be shared with the sweep's worker processes; give a file: sqlite:///path/study.db"
        ):
            storage_url(tmp_path, **given)
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE")
    assert storage_url(tmp_path, override=f"sqlite:///{tmp_path}/s.db") == f"sqlite:///{tmp_path}/s.db"


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_the_claim_lock_holds_out_a_second_claimer_on_a_sqlite_or_a_journal_study(tmp_path, kind):
    """Storage review: on a journal the lock was none, so two workers deciding at once both drew a search's last
    trial (n_trials overshot), and two sweeps starting at once both queued every row."""
    import threading

    from ablate.sweep.storage import claim_lock

    url = f"sqlite:///{tmp_path}/study.db" if kind == "sqlite" else f"journal:///{tmp_path}/study.log"
    order, held = [], threading.Event()

    def second():
        held.wait(5)
        with claim_lock(url):
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with claim_lock(url):
        held.set()
        thread.join(0.5)
        order.append("first, still holding it")
    thread.join(5)
    assert order == ["first, still holding it", "second"]
    assert kind == "sqlite" or (tmp_path / "study.log.claim").is_file()  # its own, not Optuna's append lock


def test_a_read_only_study_database_is_said_so_not_as_invalid_data(tmp_path):
    """Storage review: a study.db that could not be written gave Optuna's "invalid data in the commit, e.g. exceeding
    max length", without the file or the cause (SQLite's SQLITE_READONLY, which root's permissions cannot show here)."""
    import sqlite3
    from types import SimpleNamespace

    from ablate.sweep import sqlite_study

    db = tmp_path / "study.db"
    sqlite_study.watch(db)
    error = sqlite3.OperationalError("attempt to write a readonly database")
    error.sqlite_errorcode = 8
    context = SimpleNamespace(original_exception=error, engine=SimpleNamespace(url=SimpleNamespace(database=str(db))))
    with pytest.raises(
        PermissionError, match=f"cannot write the study database {db} \\(read-only: its permissions, or a read-only mount\\)"
    ):
        sqlite_study._said_plainly(context)


def test_a_sqlite_storage_in_a_folder_not_there_is_named_so_not_as_damage_and_not_made(tmp_path):
    """Storage review: refused with "restore it from a backup", though nothing was damaged. Not made (diff review): a
    shared path mistyped, or its mount missing, would start a new study on this machine's disk."""
    db = tmp_path / "shared" / "studies" / "study.db"
    with pytest.raises(ValueError, match=f"its folder {db.parent} does not exist; make it, or check the path$"):
        open_study("s", f"sqlite:///{db}", "maximize", optuna.samplers.RandomSampler())
    assert not (tmp_path / "shared").exists()


def test_a_lock_file_that_cannot_be_opened_is_said_of_the_study(tmp_path):
    """Diff review: on a read-only mount the error named the hidden lock file, with only its errno."""
    from ablate.sweep import sqlite_study

    (tmp_path / "study.db.lock").mkdir()  # as root no permission refuses it; a folder in its place does
    said = f"cannot write beside the study's file {tmp_path / 'study.db'} \\(Is a directory\\)"
    with pytest.raises(PermissionError, match=said), sqlite_study.study_lock(tmp_path / "study.db"):
        pass


@pytest.mark.parametrize("read_only", [False, True])
def test_a_servers_storage_checks_each_pooled_connection_before_use(monkeypatch, read_only):
    """PostgreSQL review: after a server restart every process kept dead connections in its pool; the workers
    recovered, and the sweep's first query after them failed with a traceback, writing no results."""
    from ablate.sweep import storage

    made = []
    monkeypatch.setattr(storage, "RDBStudyStorage", lambda url, **kwargs: made.append(kwargs) or "storage")
    assert make_storage("postgresql://user@127.0.0.1:1/db", read_only=read_only) == "storage"
    assert made[0]["engine_kwargs"] == {"pool_pre_ping": True}
