"""`ablate status`: a study's picture from its out_dir, its sweep file or its storage URL, read only."""

from __future__ import annotations

import optuna
import pytest
from live_study import add, progress
from optuna.trial import TrialState
from sweep_files import VARIANTS, write

from ablate.cli import main


@pytest.fixture
def study_dir(tmp_path, monkeypatch):
    """runs/sweeps/demo as a sweep leaves it: study.db (one finished, one running, one failed trial) and run dirs."""
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    out = tmp_path / "sweep"
    out.mkdir()
    study = optuna.create_study(study_name="demo", storage=f"sqlite:///{out / 'study.db'}", direction="maximize")
    add(study, TrialState.COMPLETE, "base-s1", out / "trials/0000-base-s1", value=27.5, **{"val/bleu": 27.5, "val/loss": 1.9})
    progress(out / "trials/0000-base-s1", phase="finished", step=300, epochs=1.0, eta_s=0.0)
    add(study, TrialState.RUNNING, "A-h1-s1", out / "trials/0001-A-h1-s1")
    progress(out / "trials/0001-A-h1-s1")
    add(study, TrialState.FAIL, "E-learned-s1", out / "trials/0002-E-learned-s1", fail_reason="exit code 1: RuntimeError: boom")
    return tmp_path, out


def expect_picture(text: str) -> None:
    assert "\x1b" not in text  # not a terminal: plain lines
    assert "study 'demo' at sqlite:///" in text
    assert (
        "trial 0 base-s1: finished, step 300/300, epochs 1.00, 2,031 tok/s, ETA -, val/loss 1.900, val/bleu 27.50, objective 27.5" in text
    )
    assert "trial 1 A-h1-s1: training, step 120/300, epochs 0.40, 2,031 tok/s, ETA 1m32s, val/loss 3.412, val/bleu 12.80" in text
    assert "trial 2 E-learned-s1: failed" in text and "RuntimeError: boom" in text
    # Nothing waits, so what is left is the running trial's ETA, though no finished trial recorded its time.
    assert (
        "demo: running 1, finished 1, pruned 0, failed 1; about 1m32s left at 1 at a time; best: base-s1 (trial 0) objective 27.5" in text
    )


def test_status_of_a_sweep_out_dir_its_file_and_its_url_print_the_same_picture(study_dir, capsys):
    tmp, out = study_dir
    before = (out / "study.db").read_bytes()
    sweep_file = write(tmp, VARIANTS + f"out_dir: {out}\n")
    for target in (str(out), str(sweep_file), f"sqlite:///{out / 'study.db'}"):
        assert main(["status", target]) == 0
        expect_picture(capsys.readouterr().out)
    assert (out / "study.db").read_bytes() == before  # only read


def test_a_study_whose_file_a_later_check_refuses_still_reads_through_it(study_dir, capsys):
    """A variants file with n_trials ran before n_trials was refused there: `ablate sweep` now refuses to run it, while
    status, table and archive, which read the file only to find the study, still find it."""
    tmp, out = study_dir
    old_file = write(tmp, VARIANTS + f"out_dir: {out}\nn_trials: 2\n")
    assert main(["sweep", str(old_file), "--dry-run"]) == 2
    assert "n_trials (line" in capsys.readouterr().err
    assert main(["status", str(old_file)]) == 0
    expect_picture(capsys.readouterr().out)


def test_status_shows_the_gpu_a_trial_runs_on(study_dir, capsys):
    _, out = study_dir
    study = optuna.load_study(study_name="demo", storage=f"sqlite:///{out / 'study.db'}")
    add(study, TrialState.RUNNING, "B-dk16-s1", out / "trials/0003-B-dk16-s1", gpu="GPU-8f3a")
    progress(out / "trials/0003-B-dk16-s1")
    assert main(["status", str(out)]) == 0
    text = capsys.readouterr().out
    assert "trial 3 B-dk16-s1: training, gpu GPU-8f3a, step 120/300, epochs 0.40, 2,031 tok/s" in text
    assert "trial 1 A-h1-s1: training, step 120/300" in text  # recorded on no GPU: none shown


def test_status_only_reads_leaving_no_lock_tables_or_heartbeat_folder(study_dir, tmp_path, capsys):
    _, out = study_dir
    (out / "study.db.lock").unlink(missing_ok=True)
    before = sorted(p.name for p in out.iterdir())
    assert main(["status", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == before  # no study.db.lock in a study folder that may be committed
    optuna.create_study(
        study_name="j", storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "j.log")))
    )
    assert main(["status", f"journal:///{tmp_path / 'j.log'}"]) == 0
    assert not (tmp_path / "j.log.heartbeats").exists()
    import sqlite3

    con = sqlite3.connect(tmp_path / "notes.db")  # another program's database
    con.execute("CREATE TABLE notes (x)")
    con.commit()
    con.close()
    data = (tmp_path / "notes.db").read_bytes()
    assert main(["status", f"sqlite:///{tmp_path / 'notes.db'}"]) == 2
    assert "it holds no Optuna study tables" in capsys.readouterr().err and (tmp_path / "notes.db").read_bytes() == data


def test_status_refuses_what_holds_no_study_and_asks_which_of_several(study_dir, tmp_path, capsys):
    _, out = study_dir
    for command in ("status", "table", "archive"):  # a path that does not exist is said so, by each of them alike
        assert main([command, str(tmp_path / "nothing"), *([str(tmp_path / "dest")] if command == "archive" else [])]) == 2
        assert f"ablate {command}: error: no such study directory: {tmp_path / 'nothing'}\n" == capsys.readouterr().err
    (tmp_path / "study.txt").write_text("")
    for target in (str(tmp_path / "study.txt"), "postgres://u@h/db", "sqlite:/tmp/x.db"):  # a mistyped URL keeps its hint
        assert main(["status", target]) == 2
        said = capsys.readouterr().err
        assert "neither a sweep's out_dir, a sweep file (.yaml) nor a storage URL (sqlite:///..." in said, said
    (tmp_path / "empty").mkdir()
    assert main(["status", str(tmp_path / "empty")]) == 2
    assert "holds no study.db" in capsys.readouterr().err
    (tmp_path / "run").mkdir()  # a training run's folder: said to be one, not sent looking for a sweep file
    (tmp_path / "run" / "config.yaml").write_text("seed: 1\n")
    assert main(["status", str(tmp_path / "run")]) == 2
    assert (
        f"{tmp_path / 'run'} is a training run, not a sweep: its progress is in {tmp_path / 'run' / 'progress.json'}"
        in capsys.readouterr().err
    )
    (tmp_path / "run" / "seed=1").mkdir()  # a member group's: its members write their own results
    (tmp_path / "run" / "seed=1" / "config.yaml").write_text("seed: 1\n")
    assert main(["status", str(tmp_path / "run")]) == 2
    said = "is a member group's folder, not a sweep: each member's progress and results are in its own folder (seed=1:"
    assert said in capsys.readouterr().err
    group = tmp_path / "sweep" / "groups" / "0000-base"  # a sweep's member group: its members are in the sweep's trials/
    group.mkdir(parents=True)
    (group / "config.yaml").write_text("seed: 1\n")
    (group / "group.json").write_text("{}")
    assert main(["status", str(group)]) == 2
    assert (
        f"is one of a sweep's member groups, whose members' runs are in the sweep's trials/: give the sweep's out_dir ({tmp_path / 'sweep'})"
        in capsys.readouterr().err
    )
    assert main(["status", f"sqlite:///{tmp_path / 'missing.db'}"]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "missing.db").exists()  # no new empty study
    (tmp_path / "cut").mkdir()
    for empty in (tmp_path / "cut" / "study.db", tmp_path / "study.log"):
        empty.write_bytes(b"")
    for target in (str(tmp_path / "cut"), f"journal:///{tmp_path / 'study.log'}"):
        assert main(["status", target]) == 2
        assert "is an empty file (no sweep has recorded a trial in it)" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "cut").iterdir()] == ["study.db"] and (tmp_path / "cut" / "study.db").stat().st_size == 0
    assert not list(tmp_path.glob("study.log?*"))  # nor a journal's heartbeats or lock beside it
    optuna.create_study(study_name="other", storage=f"sqlite:///{out / 'study.db'}")
    assert main(["status", f"sqlite:///{out / 'study.db'}"]) == 2
    assert "choose one with --study" in capsys.readouterr().err
    assert main(["status", f"sqlite:///{out / 'study.db'}", "--study", "demo"]) == 0
    expect_picture(capsys.readouterr().out)


@pytest.mark.parametrize("folder", ["a?b=1", "a%231", "a{b}"])
def test_status_of_an_out_dir_whose_name_holds_url_characters_reads_its_own_study(tmp_path, capsys, folder, monkeypatch):
    """`ablate status DIR` built the URL from the path as it is: '?' cut the path short ('no study'), '%23' read a#1."""
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    out = tmp_path / folder
    out.mkdir()
    from ablate.sweep.sqlite_study import sqlite_url

    study = optuna.create_study(study_name="mine", storage=sqlite_url(out / "study.db"), direction="maximize")
    add(study, TrialState.COMPLETE, "base-s1", out / "trials/0000-base-s1", value=27.5, **{"val/bleu": 27.5, "val/loss": 1.9})
    (tmp_path / "a#1").mkdir()
    optuna.create_study(study_name="other", storage=sqlite_url(tmp_path / "a#1" / "study.db"))
    assert main(["status", str(out)]) == 0
    assert "study 'mine'" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_running_trial_whose_worker_stopped_beating_shows_its_worker_gone_not_running(tmp_path, capsys, kind, monkeypatch):
    """`ablate sweep` killed (-9) leaves its trial RUNNING in the study, its progress file saying training stopped:
    status showed it running ("its end to come") for ever. Past the grace period without a heartbeat it is the work
    a rerun continues; the study is not written (a sweep fails the trial, not status)."""
    import os
    import sqlite3

    from ablate.sweep.storage import GRACE_S, make_storage

    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    url = f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else f"journal://{tmp_path / 'study.log'}"
    storage = make_storage(url)
    study = optuna.create_study(study_name="demo", storage=storage, direction="maximize")
    for n, name in enumerate(("base", "two")):
        add(study, TrialState.RUNNING, name, tmp_path / f"trials/{n}")
        progress(tmp_path / f"trials/{n}", phase="stopped" if n == 0 else "training")
    dead, alive = (t._trial_id for t in study.get_trials())
    storage.record_heartbeat(dead)
    storage.record_heartbeat(alive)
    ago = GRACE_S + 100
    if kind == "sqlite":
        con = sqlite3.connect(tmp_path / "study.db")
        con.execute(f"UPDATE trial_heartbeats SET heartbeat = datetime(heartbeat, '-{ago} seconds') WHERE trial_id = ?", (dead,))
        con.commit()
        con.close()
    else:
        beat = tmp_path / "study.log.heartbeats" / str(dead)
        os.utime(beat, (beat.stat().st_mtime - ago,) * 2)
    before = sorted((p.name, p.stat().st_mtime) for p in tmp_path.iterdir() if p.is_file())
    assert main(["status", url]) == 0
    text = capsys.readouterr().out
    assert "trial 0 base: interrupted, step 120/300" in text
    assert "(worker gone (no heartbeat for 2m" in text and "continues from its last checkpoint when the sweep runs again" in text
    assert "its end to come" not in text
    assert "trial 1 two: training, step 120/300" in text  # still beating
    assert "demo: running 1, finished 0, pruned 0, failed 0, interrupted 1" in text
    assert [t.state for t in study.get_trials()] == [TrialState.RUNNING, TrialState.RUNNING]
    assert sorted((p.name, p.stat().st_mtime) for p in tmp_path.iterdir() if p.is_file()) == before  # only read


@pytest.mark.parametrize("scheme", ["postgres", "PostgreSQL", "mariadb", "cockroachdb"])
@pytest.mark.parametrize("password", ["Sup3rSecretPw", "Open Sesame42"])
def test_a_storage_url_of_a_scheme_status_does_not_take_keeps_its_password_out_of_the_error(scheme, password, capsys, monkeypatch):
    """The else branch quoted TARGET whole: `ablate status postgres://alice:PW@...` printed the password."""
    from ablate.messages import redact

    monkeypatch.setattr(redact, "_seen", set())  # a fresh process: no password seen yet (nor left to later tests)
    assert main(["status", f"{scheme}://alice:{password}@127.0.0.1:1/db"]) == 2
    said = capsys.readouterr().err
    assert f"{scheme}://alice:***@127.0.0.1:1/db is neither a sweep's out_dir" in said, said
    assert "Sup3r" not in said and "Sesame" not in said


def test_status_of_a_url_with_a_brace_or_a_driver_error_says_one_line_password_masked(capsys, monkeypatch):
    """A raw '{' in the password escaped as Optuna's KeyError traceback quoting what the braces enclose; an error
    neither SQLAlchemy's nor Optuna's escaped as a traceback too."""
    from ablate.messages import redact
    from ablate.sweep import storage

    monkeypatch.setattr(redact, "_seen", set())  # a fresh process: no password seen yet (nor left to later tests)
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    assert main(["status", "postgresql://alice:Ab{Cd}Ef@127.0.0.1:1/db"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("ablate status: error: storage postgresql://alice:***@127.0.0.1:1/db: it holds a raw '{'")
    assert "Cd" not in said

    def refuse(url, **kwargs):
        raise TypeError(f"bad argument from {url}")

    monkeypatch.setattr(storage, "RDBStudyStorage", refuse)
    assert main(["status", "postgresql://alice:Sup3rSecretPw@127.0.0.1:1/db"]) == 2
    assert capsys.readouterr().err == (
        "ablate status: error: cannot open the storage postgresql://alice:***@127.0.0.1:1/db: TypeError: bad argument from "
        "postgresql://alice:***@127.0.0.1:1/db\n"
    )
