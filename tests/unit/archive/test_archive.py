"""`ablate archive`: a study's evidence without checkpoints, W&B files or corpus text, that tabulates exactly as the
study does, never replaces a newer archive with an older study, and scores finished runs on test before their
checkpoints are left behind."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import optuna
import pytest

from ablate.archive.study import archive
from ablate.cli import main
from ablate.evaluation.records import read_eval_file, write_eval_file
from ablate.table.finished_runs import runs_from_dirs
from ablate.table.sentence_records import collect

REFS = ["a dog runs on the beach .", "two men play chess in a park .", "the girl reads a red book .", "a cat sleeps ."]
HYPS = {1: ["a dog runs on a beach .", "two men play chess .", "a girl reads a book .", "the cat sleeps ."], 2: REFS}


def finished_run(study: Path, name: str, seed: int, splits=("valid",)) -> Path:
    run = study / "trials" / name
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    (run / "wandb" / "offline-run-x").mkdir(parents=True)
    (run / "wandb" / "offline-run-x" / "run-x.wandb").write_bytes(b"w&b")
    (run / "config.yaml").write_text(f"sweep:\n  row: base\nseed: {seed}\nout_dir: {run}\n")  # as ablate writes it: out_dir last
    (run / "summary.json").write_text(json.dumps({"last": {"val/bleu": 1.0}, "steps": 100}))
    (run / "metrics.csv").write_text("step,val/ppl\n100,9.5\n")
    (run / "train.log.lock").write_text("")
    for split in splits:
        write_eval_file(
            run,
            split,
            dataset="multi30k",
            checkpoint="avg.ckpt",
            indices=range(len(REFS)),
            hypotheses=HYPS[seed],
            references=REFS,
            nll=[3.0, 4.0, 5.0, 1.5],
            tokens=[7, 8, 7, 4],
        )
    return run


_EMPTY_DB: list[bytes] = []  # an Optuna SQLite database with its tables and no study, made once per process


def study_db(study: Path, finished: int) -> None:
    """A study "t" with `finished` COMPLETE trials, each started now, in STUDY/study.db. The file starts as a copy of
    an empty Optuna database (setting up the schema is most of what a new database costs), as Optuna leaves it."""
    if not _EMPTY_DB:
        with tempfile.TemporaryDirectory() as tmp:
            optuna.storages.RDBStorage(f"sqlite:///{tmp}/empty.db").engine.dispose()
            _EMPTY_DB.append((Path(tmp) / "empty.db").read_bytes())
    with open(study / "study.db", "xb") as f:  # never over an existing database
        f.write(_EMPTY_DB[0])
    s = optuna.create_study(storage=f"sqlite:///{study / 'study.db'}", study_name="t")
    for _ in range(finished):
        s.tell(s.ask(), 1.0)


@pytest.fixture
def study(tmp_path) -> Path:
    root = tmp_path / "study"
    finished_run(root, "0000-base-s1", 1)
    finished_run(root, "0001-base-s2", 2)
    (root / "trials" / "0002-base-s3" / "checkpoints").mkdir(parents=True)  # still training: no summary
    study_db(root, 2)
    return root


def test_archive_keeps_evidence_without_text_weights_or_wandb(study, tmp_path):
    dest = tmp_path / "archive"
    (study / "trials/0001-base-s2/tokenizer.model").write_bytes(b"subwords")  # a resumed run's copy of its tokenizer
    report = archive(study, dest)
    assert report.trials == ["trials/0000-base-s1", "trials/0001-base-s2"] and report.unfinished == ["0002-base-s3"]
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == [
        "study.db",
        *(
            f"trials/{t}/{f}"
            for t in ("0000-base-s1", "0001-base-s2")
            for f in ("config.yaml", "eval/valid.json", "metrics.csv", "summary.json")
        ),
    ]
    text = "".join(p.read_text(errors="replace") for p in dest.rglob("*.json"))
    assert not any(sentence in text for sentence in REFS + HYPS[1])  # no corpus text, no hypothesis
    rec = read_eval_file(dest / "trials/0000-base-s1/eval/valid.json", "valid")
    assert rec.hypotheses is None and rec.references is None and len(rec.bleu_stats) == 4
    assert optuna.load_study(study_name="t", storage=f"sqlite:///{dest / 'study.db'}").trials[1].state.name == "COMPLETE"


def test_archived_study_tabulates_as_the_study(study, tmp_path):
    archive(study, tmp_path / "archive")
    live, kept = runs_from_dirs(study), runs_from_dirs(tmp_path / "archive")
    ev_live, ev_kept = collect(live, "valid"), collect(kept, "valid")
    assert [r.bleu for r in kept] == [r.bleu for r in live] and [r.ppl for r in kept] == [r.ppl for r in live]
    assert kept[1].bleu == pytest.approx(100.0) and 0 < kept[0].bleu < 99  # seed 2 copies the references
    for a, b in zip(live, kept):
        assert (ev_kept.per_run[b.source]["bleu"] == ev_live.per_run[a.source]["bleu"]).all()
    assert ev_kept.bleu_signature == ev_live.bleu_signature and ev_kept.sentences == 4


def test_archive_never_replaces_a_newer_archive_and_keeps_what_dest_has(study, tmp_path):
    dest = tmp_path / "archive"
    archive(study, dest)
    (dest / "trials" / "0009-extra").mkdir()
    (dest / "trials" / "0009-extra" / "summary.json").write_text("{}")
    older = tmp_path / "older"
    finished_run(older, "0000-base-s1", 1)
    study_db(older, 1)
    before = (dest / "study.db").read_bytes()
    with pytest.raises(ValueError, match=r"holds 2 finished trials the study's .* does not \(t trial 0, t trial 1\)"):
        archive(older, dest)
    assert (dest / "study.db").read_bytes() == before and (dest / "trials" / "0009-extra" / "summary.json").exists()
    with pytest.raises(ValueError, match="inside the study"):
        archive(study, study / "archive")
    for above in (study.parent, study.parent.parent):  # `ablate archive runs/sweeps/x .` from the project's root
        with pytest.raises(ValueError, match=rf"the archive {above} would hold the study {study} \(a folder above it\)"):
            archive(study, above)
        assert not (above / "study.db").exists()


def test_archive_refuses_a_copy_another_machine_continued_from_the_same_archive(study, tmp_path):
    """Two machines restore one archive and each finishes a different trial: the first to archive back extends it (a
    superset of its trials), the second would drop that trial from the database, so it is refused, naming it."""
    import shutil

    dest = tmp_path / "archive"
    archive(study, dest)
    machines = {}
    for name in ("a", "b"):
        machines[name] = tmp_path / name
        shutil.copytree(dest, machines[name])
        s = optuna.load_study(study_name="t", storage=f"sqlite:///{machines[name] / 'study.db'}")
        s.tell(s.ask(), 2.0)
    archive(machines["a"], dest)
    assert len(optuna.load_study(study_name="t", storage=f"sqlite:///{dest / 'study.db'}").trials) == 3
    before = (dest / "study.db").read_bytes()
    with pytest.raises(ValueError, match=r"holds 1 finished trials the study's .* does not \(t trial 2\).*another machine"):
        archive(machines["b"], dest)
    assert (dest / "study.db").read_bytes() == before


def test_archive_scores_runs_without_a_test_record_first(study, tmp_path):
    scored = []

    def evaluate(run: Path) -> None:
        scored.append(run.name)
        finished_run(tmp_path / "scratch" / run.name, "x", 1, splits=("test",))
        (run / "eval" / "test.json").write_bytes((tmp_path / "scratch" / run.name / "trials/x/eval/test.json").read_bytes())

    (study / "trials/0001-base-s2/eval/test.json").write_bytes(
        (study / "trials/0001-base-s2/eval/valid.json").read_bytes().replace(b'"valid"', b'"test"')
    )
    report = archive(study, tmp_path / "archive", evaluate, "test")
    assert scored == ["0000-base-s1"] and report.evaluated == ["trials/0000-base-s1"]
    assert read_eval_file(tmp_path / "archive/trials/0000-base-s1/eval/test.json", "test").bleu_stats is not None


def test_archive_refuses_a_changed_file_before_scoring_anything(study, tmp_path):
    """Scoring takes minutes a run: an archive that will be refused must not cost them first."""
    (study / "study.db").unlink()
    dest = tmp_path / "archive"
    archive(study, dest)
    (study / "trials/0001-base-s2/summary.json").write_text('{"bogus": true}')
    scored = []
    with pytest.raises(ValueError, match=r"already holds 1 files .*summary.json\): not replacing"):
        archive(study, dest, lambda run: scored.append(run.name), "test")
    assert scored == []
    # Nor when the study has no test record yet but the archive does: scoring would write it anew.
    (study / "trials/0001-base-s2/summary.json").write_bytes((dest / "trials/0001-base-s2/summary.json").read_bytes())
    (dest / "trials/0001-base-s2/eval/test.json").write_text("{}")
    with pytest.raises(ValueError, match=r"already holds 1 files .*\(trials/0001-base-s2/eval/test.json\): not replacing"):
        archive(study, dest, lambda run: scored.append(run.name), "test")
    assert scored == []


def test_archive_refuses_a_malformed_record_naming_it(study, tmp_path, capsys):
    (study / "trials/0001-base-s2/eval/valid.json").write_text('{"split": "valid"}')
    assert main(["archive", str(study), str(tmp_path / "archive")]) == 2
    err = capsys.readouterr().err
    assert "0001-base-s2/eval/valid.json" in err and "missing key 'nll'" in err


def test_archive_command_reports_what_it_kept(study, tmp_path, capsys):
    assert main(["archive", str(study), str(tmp_path / "archive")]) == 0
    out = capsys.readouterr().out
    assert "archived 2 finished runs" in out and "with the study database" in out and "0002-base-s3" in out


def test_archive_refuses_a_study_without_its_database_over_an_archive_with_one(study, tmp_path, capsys):
    """Without a database nothing shows the study is newer than the archive: its files must not replace the archive's."""
    dest = tmp_path / "archive"
    archive(study, dest)
    bogus = tmp_path / "bogus"
    (finished_run(bogus, "0000-base-s1", 1) / "summary.json").write_text('{"bogus": true}')
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert main(["archive", str(bogus), str(dest)]) == 2
    err = capsys.readouterr().err
    assert f"{dest / 'study.db'} exists but the study {bogus} has no study.db" in err
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before


def test_archive_without_databases_adds_files_but_never_changes_one(study, tmp_path):
    (study / "study.db").unlink()
    dest = tmp_path / "archive"
    archive(study, dest)
    assert archive(study, dest).trials == ["trials/0000-base-s1", "trials/0001-base-s2"]  # the same again: fine
    (study / "trials/0001-base-s2/notes.txt").write_text("new")
    finished_run(study, "0003-base-s4", 1)
    archive(study, dest)  # new files and trials are added
    assert (dest / "trials/0001-base-s2/notes.txt").read_text() == "new" and (dest / "trials/0003-base-s4/summary.json").exists()
    (study / "trials/0000-base-s1/summary.json").write_text('{"bogus": true}')
    (study / "trials/0000-base-s1/more.txt").write_text("x")
    before = (dest / "trials/0000-base-s1/summary.json").read_bytes()
    with pytest.raises(ValueError, match=r"already holds 1 files .* \(trials/0000-base-s1/summary.json\): not replacing"):
        archive(study, dest)
    assert (dest / "trials/0000-base-s1/summary.json").read_bytes() == before
    assert not (dest / "trials/0000-base-s1/more.txt").exists()  # refused before anything is written
    study_db(study, 2)  # a database in the study alone shows nothing newer than the archive's files either
    with pytest.raises(ValueError, match=r"summary.json\): not replacing .*\(the archive has no study.db\)"):
        archive(study, dest)
    assert (dest / "trials/0000-base-s1/summary.json").read_bytes() == before and not (dest / "study.db").exists()


def test_archive_keeps_what_links_link_to_and_refuses_a_broken_link(study, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run0, run1 = study / "trials/0000-base-s1", study / "trials/0001-base-s2"
    for path in (run0 / "summary.json", run0 / "eval/valid.json"):
        (elsewhere / path.name).write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(elsewhere / path.name)
    (run1 / "eval").rename(elsewhere / "eval")
    (run1 / "eval").symlink_to(elsewhere / "eval", target_is_directory=True)
    (elsewhere / "eval" / "loop").symlink_to(run1, target_is_directory=True)  # a link back up: no end to follow
    dest = tmp_path / "archive"
    assert archive(study, dest).trials == ["trials/0000-base-s1", "trials/0001-base-s2"]
    for rel in ("0000-base-s1/summary.json", "0000-base-s1/eval/valid.json", "0001-base-s2/eval/valid.json"):
        assert (dest / "trials" / rel).is_file() and not (dest / "trials" / rel).is_symlink()
    assert read_eval_file(dest / "trials/0000-base-s1/eval/valid.json", "valid").hypotheses is None
    assert runs_from_dirs(dest)[0].bleu == runs_from_dirs(study)[0].bleu
    (run1 / "metrics.csv").unlink()
    (run1 / "metrics.csv").symlink_to(elsewhere / "gone.csv")
    with pytest.raises(FileNotFoundError, match=r"0001-base-s2/metrics.csv: a link to .*gone.csv, which does not exist"):
        archive(study, tmp_path / "archive2")
    assert not (tmp_path / "archive2").exists()


def test_archive_keeps_and_reports_a_finished_run_without_its_config(study, tmp_path, capsys):
    """The database marks it finished (a rerun will not train it again): its evidence is kept, and the user told."""
    (study / "trials/0001-base-s2/config.yaml").unlink()
    dest = tmp_path / "archive"
    assert main(["archive", str(study), str(dest)]) == 0
    out = capsys.readouterr().out
    assert "warning: 1 finished runs have no config.yaml" in out and "trials/0001-base-s2" in out
    assert (dest / "trials/0001-base-s2/summary.json").is_file() and (dest / "trials/0001-base-s2/eval/valid.json").is_file()
    assert archive(study, tmp_path / "again").no_config == ["trials/0001-base-s2"]


@pytest.mark.timeout(60, method="thread")  # SQLite's own retries ignore a signal: a regression must not hang the suite
@pytest.mark.slow  # waits out a busy timeout: seconds; the default set stays under a minute
def test_archive_gives_up_on_a_locked_database_saying_it_is_busy(study, tmp_path, capsys, monkeypatch):
    import sqlite3
    import threading
    import time

    from ablate.archive import study_db as archive_db
    from ablate.sweep import study_file

    monkeypatch.setattr(study_file, "BUSY_SECONDS", 0.5)
    lock = sqlite3.connect(study / "study.db", isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")  # a worker writing
    try:
        assert main(["archive", str(study), str(tmp_path / "archive")]) == 2
        err = capsys.readouterr().err
        assert f"{study / 'study.db'}: the study database is busy" in err and "not a readable" not in err
        assert not (tmp_path / "archive").exists()
        failed = []  # the backup alone (a lock taken after the check): SQLite would retry it forever

        def backup() -> None:
            try:
                with archive_db.database_copy(study / "study.db", tmp_path / "out" / "study.db"):
                    failed.append("the block ran: the copy was taken")
            except ValueError as e:
                failed.append(str(e))

        start, thread = time.monotonic(), threading.Thread(target=backup, daemon=True)
        thread.start()
        thread.join(timeout=20)
        assert not thread.is_alive() and time.monotonic() - start < 20
        assert "study.db: the study database is busy" in failed[0] and not (tmp_path / "out").exists()
    finally:
        lock.rollback()
        lock.close()


@pytest.mark.parametrize("content", [b"", b"\x8f\x02not sqlite at all\x00" * 64], ids=["empty", "garbage"])
def test_archive_refuses_a_damaged_database_before_copying_anything(study, tmp_path, capsys, content):
    (study / "study.db").write_bytes(content)
    dest = tmp_path / "archive"
    assert main(["archive", str(study), str(dest)]) == 2
    assert f"{study / 'study.db'}: not a readable Optuna study database" in capsys.readouterr().err
    assert not dest.exists()


def test_archive_refuses_a_destination_it_cannot_write_naming_it(study, tmp_path, capsys, monkeypatch):
    import os

    dest = tmp_path / "archive"
    dest.write_text("a file")
    assert main(["archive", str(study), str(dest)]) == 2
    assert f"{dest} is a file, not a folder; nothing was written" in capsys.readouterr().err and dest.read_text() == "a file"
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: a read-only folder as an ordinary user sees it
        real = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != read_only and real(path, mode, **kw))
    try:
        assert main(["archive", str(study), str(read_only / "archive")]) == 2
        assert f"{read_only} is not writable (permission denied); nothing was written" in capsys.readouterr().err
    finally:
        read_only.chmod(0o755)
    assert list(read_only.iterdir()) == []


def test_a_run_the_database_does_not_mark_finished_is_left_out_and_named(tmp_path, capsys):
    """Issue 31: a trial cut after its run wrote summary.json (or whose row failed after it) is trained again by the
    sweep; archived, its run would stand beside the rerun as a second run of the same seed."""
    root = tmp_path / "study"
    runs = [finished_run(root, name, seed) for name, seed in (("0000-base-s1", 1), ("0001-base-s2", 2), ("0002-base-s1b", 1))]
    s = optuna.create_study(storage=f"sqlite:///{root / 'study.db'}", study_name="t")
    for run, state in zip(runs, (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL, optuna.trial.TrialState.PRUNED)):
        trial = s.ask()
        trial.set_user_attr("out_dir", str(run.resolve()))
        s.tell(trial, 1.0 if state == optuna.trial.TrialState.COMPLETE else None, state=state)
    assert main(["archive", str(root), str(tmp_path / "archive")]) == 0
    out = capsys.readouterr().out
    assert "archived 2 finished runs" in out
    assert "left out 1 runs with a summary that the study database does not mark finished" in out and "0001-base-s2" in out
    archived = sorted(p.name for p in (tmp_path / "archive" / "trials").iterdir())
    assert archived == ["0000-base-s1", "0002-base-s1b"]  # pruned is finished: the sweep does not train it again


def test_a_renamed_or_deleted_trial_folder_is_named_for_what_it_is(tmp_path, capsys):
    """A folder no trial names (renamed, or copied in from another study) was said to be trained again by the sweep,
    which never does; and a finished trial whose folder was deleted went unsaid, its archive marking it finished."""
    root = tmp_path / "study"
    runs = [finished_run(root, name, seed) for name, seed in (("0000-base-s1", 1), ("0001-base-s2", 2), ("0002-base-s1b", 1))]
    s = optuna.create_study(storage=f"sqlite:///{root / 'study.db'}", study_name="t")
    for run in runs:
        trial = s.ask()
        trial.set_user_attr("out_dir", str(run.resolve()))
        s.tell(trial, 1.0)
    runs[1].rename(root / "trials" / "keep-base-s2")
    shutil.rmtree(runs[2])
    assert main(["archive", str(root), str(tmp_path / "archive")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "archived 1 finished runs" in out and "the sweep trains those rows again" not in out
    assert "left out 1 runs under trials/ that no trial of the study database names (renamed, or copied in" in out
    assert ": keep-base-s2; give each the name its trial records" in out
    assert (
        "warning: 2 trials the study database marks finished have no run folder (deleted or renamed): 0001-base-s2, 0002-base-s1b;" in out
    )


def test_an_archive_into_a_folder_holding_other_runs_is_refused(study, tmp_path):
    """`ablate archive S runs` turned runs/ into a study holding every run in it: training under it was refused after."""
    mine = finished_run(tmp_path / "runs", "mine", 1).parent.parent  # runs/trials/mine, the user's own
    with pytest.raises(ValueError, match=rf"{mine} already holds runs that are not the study's \(trials/mine\)"):
        archive(study, mine)
    assert not (mine / "study.db").exists()
    archive(study, tmp_path / "arc")
    (tmp_path / "arc" / "study.db").unlink()  # an archive of this study: its runs are the study's
    archive(study, tmp_path / "arc")


def test_a_finished_trial_that_lost_its_summary_is_named_not_said_to_be_trained_again(tmp_path, capsys):
    root = tmp_path / "study"
    runs = [finished_run(root, name, seed) for name, seed in (("0000-base-s1", 1), ("0001-base-s2", 2))]
    s = optuna.create_study(storage=f"sqlite:///{root / 'study.db'}", study_name="t")
    for run in runs:
        trial = s.ask()
        trial.set_user_attr("out_dir", str(run.resolve()))
        s.tell(trial, 1.0)
    (runs[1] / "summary.json").unlink()
    assert main(["archive", str(root), str(tmp_path / "archive")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "unfinished" not in out
    assert "warning: 1 trials the study database marks finished (or pruned) have no summary.json: 0001-base-s2;" in out


def test_a_study_whose_trials_record_no_run_folder_keeps_every_run_with_a_summary(study, tmp_path):
    """Trials of a study older than the out_dir record (the fixture's database has none): every run is kept."""
    assert archive(study, tmp_path / "archive").trials == ["trials/0000-base-s1", "trials/0001-base-s2"]


def test_an_archive_onto_a_full_disk_leaves_nothing_and_says_so(study, tmp_path, capsys, monkeypatch):
    """Issue 38 item 4: the archive is written into a temporary folder beside DEST and moved in at the end."""
    from full_disk import FullDisk

    FullDisk(tmp_path, room=300).install(monkeypatch)  # room for a file or two of the first trial
    assert main(["archive", str(study), str(tmp_path / "arch")]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"ablate archive: error: disk full: could not write {tmp_path / 'arch'}/")
        and "nothing of the archive was left" in err
    ), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study"]  # no DEST, no temporary folder


def test_an_archive_cut_short_while_moving_in_is_refused_by_table_and_the_next_archive_completes_it(study, tmp_path, capsys, monkeypatch):
    import os

    from ablate.files.destination import ARCHIVE_INCOMPLETE

    dest = tmp_path / "arch"
    archive(study, dest)
    shutil.rmtree(study / "trials" / "0002-base-s3")
    finished_run(study, "0002-base-s3", 1)  # the third trial finished since
    s = optuna.load_study(study_name="t", storage=f"sqlite:///{study / 'study.db'}")
    s.tell(s.ask(), 1.0)
    real, moved = os.replace, []

    def cut(src, dst):  # Ctrl-C after the first file moved into DEST (not while writing into the temporary folder)
        if str(dst).startswith(f"{dest}/"):
            if moved:
                raise KeyboardInterrupt
            moved.append(dst)
        real(src, dst)

    monkeypatch.setattr(os, "replace", cut)
    assert main(["archive", str(study), str(dest)]) == 130
    assert capsys.readouterr().err.strip() == "ablate archive: stopped by Ctrl-C (SIGINT); no file was left half-written or temporary"
    monkeypatch.setattr(os, "replace", real)
    assert (dest / ARCHIVE_INCOMPLETE).exists() and sorted(p.name for p in tmp_path.iterdir()) == ["arch", "study"]
    assert main(["table", str(dest), "--out", str(tmp_path / "tables")]) == 2
    assert f"{dest} is an incomplete archive ({ARCHIVE_INCOMPLETE} is there)" in capsys.readouterr().err
    assert not (tmp_path / "tables").exists()
    archive(study, dest)  # again: complete, the marker gone
    assert not (dest / ARCHIVE_INCOMPLETE).exists() and (dest / "trials" / "0002-base-s3" / "summary.json").is_file()


def test_an_archive_inside_another_run_is_refused(study, tmp_path, capsys):
    other = tmp_path / "other-run"
    (other / "checkpoints").mkdir(parents=True)
    (other / "config.yaml").write_text("seed: 1\n")
    assert main(["archive", str(study), str(other / "arch")]) == 2
    assert f"the archive {other / 'arch' / 'study.db'} is inside the run folder {other}" in capsys.readouterr().err
    assert not (other / "arch").exists()


def test_an_archive_onto_another_study_or_a_run_is_refused_even_with_nothing_finished(study, tmp_path, capsys):
    """Another study with no finished trial (one interrupted) passed the "holds every finished trial" check: its
    study.db and its trials' files were replaced by the archived study's."""
    other = tmp_path / "b"
    (other / "trials" / "0000-base" / "checkpoints").mkdir(parents=True)
    (other / "trials" / "0000-base" / "config.yaml").write_text("seed: 1\n")
    optuna.create_study(storage=f"sqlite:///{other / 'study.db'}", study_name="b").ask()  # running, unfinished
    before = {p: p.read_bytes() for p in other.rglob("*") if p.is_file()}
    assert main(["archive", str(study), str(other)]) == 2
    err = capsys.readouterr().err
    assert f"{other / 'study.db'} holds the study 'b', which the study's {study / 'study.db'} does not ('t')" in err
    assert {p: p.read_bytes() for p in other.rglob("*") if p.is_file()} == before
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 1\n")
    assert main(["archive", str(study), str(run)]) == 2
    assert f"{run} holds a training run (config.yaml beside its files)" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "config.yaml"]


def test_a_folder_that_is_no_study_is_refused_and_no_archive_made(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 1\n")
    (tmp_path / "empty").mkdir()
    for folder, what in ((run, "a run"), (tmp_path / "empty", "no study")):
        assert main(["archive", str(folder), str(tmp_path / "arch")]) == 2
        assert f"{folder} is {what}: archive a sweep's out_dir, or a folder of runs" in capsys.readouterr().err
    assert not (tmp_path / "arch").exists()
    for row in ("base", "h1"):  # runs trained by hand, side by side: a study `ablate table` reads, so archived
        (tmp_path / "by-hand" / row).mkdir(parents=True)
        (tmp_path / "by-hand" / row / "config.yaml").write_text("seed: 1\n")
        (tmp_path / "by-hand" / row / "summary.json").write_text("{}\n")
    assert main(["archive", str(tmp_path / "by-hand"), str(tmp_path / "arch")]) == 0
    assert sorted(p.name for p in (tmp_path / "arch").iterdir()) == ["base", "h1"]
