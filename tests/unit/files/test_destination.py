"""The one rule for outputs (issue 38): never an input (links and hard links count), never through a symlink in the
last component, never inside a study or run folder the command does not own; a stream is written, not replaced."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.files.destination import (
    ARCHIVE_INCOMPLETE,
    check_output,
    check_run_folder,
    folder_kind,
    is_stream,
    owner_of,
    refuse_existing,
    run_of_checkpoint,
    stdout_is,
    unwritable,
)


def run_folder(path):
    (path / "checkpoints").mkdir(parents=True)
    (path / "config.yaml").write_text("seed: 1\n")
    return path


def test_an_output_that_is_an_input_is_refused_naming_both_by_any_name(tmp_path):
    src = tmp_path / "mine.en"
    src.write_text("a\n")
    (tmp_path / "hard.en").hardlink_to(src)
    (tmp_path / "soft.en").symlink_to(src)
    for out in (src, tmp_path / "hard.en", tmp_path / "." / "mine.en"):
        with pytest.raises(ValueError, match=f"--output {out} is the input --input {src}: writing it would replace the input"):
            check_output(out, "--output", [("--input", src), ("checkpoint", None)])
    with pytest.raises(ValueError, match="soft.en is a symbolic link \\(to .*mine.en\\); ablate never writes through a link"):
        check_output(tmp_path / "soft.en", "--output", [("--input", src)])
    assert src.read_text() == "a\n"
    check_output(tmp_path / "other.en", "--output", [("--input", src)])  # a new file: fine
    check_output(tmp_path / "missing-input", "--output", [("--input", tmp_path / "gone")])


def test_outputs_inside_a_study_or_run_are_refused_unless_the_command_owns_it(tmp_path):
    study = tmp_path / "study"
    run = run_folder(study / "trials" / "t1")
    (study / "study.db").write_bytes(b"")
    other = run_folder(tmp_path / "other")
    assert folder_kind(study) == "study" and folder_kind(run) == "run" and folder_kind(tmp_path) is None
    assert owner_of(run / "eval" / "x.json") == ("run", run) and owner_of(study / "x") == ("study", study)
    with pytest.raises(
        ValueError, match=f"-o {study / 'hyp.txt'} is inside the study folder {study}, which this command does not write in"
    ):
        check_output(study / "hyp.txt", "-o", owns=[run])  # its own run's study is not its own
    with pytest.raises(ValueError, match=f"is inside the run folder {other}"):
        check_output(other / "avg.ckpt", "-o", owns=[run])
    check_output(run / "hyp.txt", "-o", owns=[run])
    check_output(run / "notes" / "x.json", "--out", owns=[study])  # inside a run inside the study it owns
    check_output(tmp_path / "elsewhere" / "x", "-o")
    (tmp_path / "arch").mkdir()
    (tmp_path / "arch" / ARCHIVE_INCOMPLETE).touch()
    assert folder_kind(tmp_path / "arch") == "study"


def test_a_results_csv_of_the_users_own_makes_no_study_of_its_folder(tmp_path):
    """`echo a,b > proj/results.csv; translate -o proj/sub/out.txt` was refused as "inside the study folder proj":
    a study is known by its database, journal, archive marker, or results beside trials/ or groups/, as for train."""
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "results.csv").write_text("a,b\n")
    assert folder_kind(project) is None and owner_of(project / "sub" / "out.txt") is None
    check_output(project / "sub" / "out.txt", "-o")
    (project / "trials").mkdir()
    assert folder_kind(project) == "study"
    with pytest.raises(ValueError, match=f"is inside the study folder {project}"):
        check_output(project / "sub" / "out.txt", "-o")


def test_a_runs_folder_is_never_a_study_nor_inside_one_or_another_run_unless_at_home_there(tmp_path):
    study = tmp_path / "study"
    trial = run_folder(study / "trials" / "t1")
    (study / "study.db").write_bytes(b"")
    run = run_folder(tmp_path / "run")
    stranger = lambda kind, folder: False  # noqa: E731
    with pytest.raises(ValueError, match=f"out_dir={study} is a study's folder \\(it holds study.db, trials\\)"):
        check_run_folder(study, stranger)
    asked = []
    for out, kind, folder in ((study / "extra", "study", study), (trial / "sub", "run", trial), (run / "checkpoints" / "x", "run", run)):
        with pytest.raises(ValueError, match=f"out_dir={out} is inside the {kind} folder {folder} \\(it holds "):
            check_run_folder(out, lambda k, f: asked.append((k, f)) or False)
        assert asked.pop() == (kind, folder)
    check_run_folder(study / "extra", lambda kind, folder: kind == "study")  # the sweep's own trial, run by hand
    check_run_folder(run, stranger)  # its own folder: resumed, or refused later as an earlier run
    check_run_folder(tmp_path / "new" / "run", stranger)
    assert not (study / "extra").exists() and sorted(p.name for p in run.iterdir()) == ["checkpoints", "config.yaml"]
    project = tmp_path / "project"  # a results.csv of the user's own: no study without trials beside it
    (project / "runs").mkdir(parents=True)
    (project / "results.csv").write_text("a,b\n")
    check_run_folder(project / "runs" / "qs", stranger)
    (tmp_path / "link").symlink_to(study / "trials")  # a link into a study's trials is inside it
    with pytest.raises(ValueError, match=f"is inside the study folder {study}"):
        check_run_folder(tmp_path / "link" / "new", stranger)


@pytest.mark.parametrize("written, named", [
    ("summary.json", "summary.json"), ("config.yaml", "config.yaml"), ("metrics.csv", "metrics.csv"),
    ("progress.json", "progress.json"), ("eval/valid.json", "eval/valid.json"), ("eval/test.json", "eval/test.json"),
    ("resume-1/metrics.csv", "resume-1"), ("config.before-resume-1.yaml", "config.before-resume-1.yaml"),
    ("checkpoints/last.ckpt", "checkpoints/last.ckpt"), ("checkpoints/step=400.ckpt", "checkpoints/step=400.ckpt"),
    ("checkpoints/best.ckpt", "checkpoints/best.ckpt"),
    (".run.lock", ".run.lock"),  # `translate -o RUN/.run.lock --force` broke the lock: a second --resume trained beside it
])  # fmt: skip
def test_what_ablate_wrote_in_a_run_is_never_written_over_even_by_a_command_that_owns_the_run(tmp_path, written, named):
    """`translate -o RUN/checkpoints/last.ckpt` (a typo) replaced the run's resume point with one line of text."""
    run = run_folder(tmp_path / "run")
    for name in ("last.ckpt", "best.ckpt", "step=400.ckpt"):
        (run / "checkpoints" / name).write_bytes(b"weights")
    with pytest.raises(ValueError, match=f"-o {run / written} is {named} of the run {run}, which ablate writes as its record"):
        check_output(run / written, "-o", owns=[run])


@pytest.mark.parametrize("written", ["summary.json", "config.yaml", "metrics.csv", "eval/test.json", "train.log"])
def test_a_forcing_flag_replaces_a_runs_checkpoints_never_its_other_records(tmp_path, written):
    """`ablate average -o RUN/summary.json --force` wrote a checkpoint over the summary (and its refusal without
    --force suggested it); --force stands for a checkpoint the run saved, which the refusal alone offers."""
    run = run_folder(tmp_path / "run")
    (run / "checkpoints" / "best.ckpt").write_bytes(b"weights")
    with pytest.raises(ValueError) as refused:
        check_output(run / written, "-o", owns=[run], override="--force", forced=True)
    assert f"is {written} of the run {run}, which ablate writes as its record; choose another -o;" in str(refused.value)
    with pytest.raises(ValueError, match="choose another -o, or pass --force to write over it"):
        check_output(run / "checkpoints" / "best.ckpt", "-o", owns=[run], override="--force")
    check_output(run / "checkpoints" / "best.ckpt", "-o", owns=[run], override="--force", forced=True)


def test_new_files_beside_a_runs_records_are_written(tmp_path):
    """An average the run lacks (the file `ablate table` asks for where summary.json selected an average), notes."""
    run = run_folder(tmp_path / "run")
    for new in ("checkpoints/avg.ckpt", "checkpoints/avg5.ckpt", "eval/test.hyp", "resume-notes.txt", "hyp.de"):
        check_output(run / new, "-o", owns=[run])
    (run / "checkpoints" / "avg.ckpt").write_bytes(b"weights")
    with pytest.raises(ValueError, match="is checkpoints/avg.ckpt of the run"):
        check_output(run / "checkpoints" / "avg.ckpt", "-o", owns=[run])


def test_a_study_s_own_files_are_never_replaced_by_the_table_that_owns_it(tmp_path):
    study = tmp_path / "study"
    (study / "trials").mkdir(parents=True)
    (study / "study.db").write_bytes(b"")
    for name in ("results.csv", "results.json", "study.db", "study.db.lock", "study.log.heartbeats", ARCHIVE_INCOMPLETE):
        with pytest.raises(ValueError, match=f"--out {study / name} is {name} of the study {study}"):
            check_output(study / name, "--out", owns=[study])
    check_output(study / "table3.csv", "--out", owns=[study])


def test_streams_and_linked_parent_folders_are_written(tmp_path):
    assert is_stream("/dev/null") and is_stream("/dev/stdout") and not is_stream(tmp_path / "x")
    check_output("/dev/stdout", "--output", [("--input", tmp_path / "x")])
    (tmp_path / "real").mkdir()
    (tmp_path / "scratch").symlink_to(tmp_path / "real", target_is_directory=True)
    check_output(tmp_path / "scratch" / "out.txt", "--output")


def test_a_file_under_dev_shm_is_a_file_checked_as_any_other(shm_dir):
    """/dev/shm is an ordinary tmpfs: an output there skipped every check (by its /dev/ prefix), so `translate -i
    /dev/shm/x -o /dev/shm/x` emptied its input, a file was written over without --force, a link followed."""
    mine = shm_dir / "in.en"
    mine.write_text("a\n")
    (shm_dir / "link").symlink_to(mine)
    assert not is_stream(mine) and not is_stream(shm_dir / "new") and not is_stream("/dev/no-such-device-here")
    with pytest.raises(ValueError, match=f"--output {mine} is the input --input {mine}: writing it would replace the input"):
        check_output(mine, "--output", [("--input", mine)])
    with pytest.raises(ValueError, match="already exists; pass --force"):
        refuse_existing(mine, "--output", forced=False)
    with pytest.raises(ValueError, match="is a symbolic link"):
        check_output(shm_dir / "link", "--output", [("--input", shm_dir / "other")])
    check_output(shm_dir / "new.de", "--output", [("--input", mine)])
    assert mine.read_text() == "a\n"


def test_stdout_is_a_stream_when_it_is_a_file_and_is_never_an_input(tmp_path):
    """-o /dev/stdout with stdout a file (`>> log`) is a stream, written into; the file stdout is may not be an input."""
    log, mine = tmp_path / "log.txt", tmp_path / "mine.en"
    mine.write_text("a\n")
    code = (
        "import sys; from ablate.files.destination import check_output, is_stream, stdout_is\n"
        "assert is_stream('/dev/stdout') and is_stream('/dev/fd/1') and stdout_is('/dev/stdout') and not stdout_is(sys.argv[1])\n"
        "assert not is_stream(sys.argv[1])  # the file itself, by its own name, is a file\n"
        "check_output('/dev/stdout', '-o', [('-i', sys.argv[1])])\n"
    )
    with open(log, "ab") as out:
        subprocess.run([sys.executable, "-c", code, str(mine)], stdout=out, check=True)
    with open(mine, "ab") as out:  # `ablate translate -i mine.en -o /dev/stdout >> mine.en`
        run = subprocess.run([sys.executable, "-c", code, str(mine)], stdout=out, stderr=subprocess.PIPE, text=True)
    assert run.returncode == 1 and "-o /dev/stdout is the input -i " in run.stderr
    assert not stdout_is(tmp_path / "x") and is_stream("/dev/null")


def test_run_of_checkpoint(tmp_path):
    assert run_of_checkpoint(tmp_path / "r" / "checkpoints" / "best.ckpt") == tmp_path / "r"
    assert run_of_checkpoint(tmp_path / "avg.ckpt") is None


def test_unwritable_says_why_a_file_could_not_be_replaced(tmp_path, monkeypatch):
    assert unwritable(tmp_path / "new" / "deeper" / "t.md") is None  # folders to be made: asked of the nearest one
    (tmp_path / "dir.md").mkdir()
    assert unwritable(tmp_path / "dir.md") == f"{tmp_path / 'dir.md'} is a folder, where a file is to be written"
    (tmp_path / "afile").write_text("mine")
    assert unwritable(tmp_path / "afile" / "sub" / "t.md") == f"{tmp_path / 'afile'} is a file, not a folder"
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access  # root may write anywhere: the folder as an ordinary user would see it
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != locked and real(path, mode, **kw))
    assert unwritable(locked / "t.md") == f"{locked} is not writable (permission denied)"


def test_an_output_that_could_not_be_written_is_refused_before_the_work_it_would_hold(tmp_path, monkeypatch):
    """`ablate evaluate --hyp-out DIR` decoded the whole split, then failed naming a temporary file: the score was lost."""
    (tmp_path / "hyps").mkdir()
    with pytest.raises(
        ValueError,
        match=f"--hyp-out {tmp_path / 'hyps'}: {tmp_path / 'hyps'} is a folder, where a file is to be written; nothing was written",
    ):
        check_output(tmp_path / "hyps", "--hyp-out")
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != locked and real(path, mode, **kw))
    with pytest.raises(ValueError, match="is not writable"):
        check_output(locked / "out.txt", "--output")
    check_output(tmp_path / "new" / "out.txt", "--output")  # a folder still to be made: fine


def test_a_file_already_there_is_written_over_only_when_forced(tmp_path):
    mine = tmp_path / "mine.de"
    mine.write_text("a\n")
    with pytest.raises(ValueError, match=f"-o {mine} already exists; pass --force to write over it, or choose another -o; nothing"):
        refuse_existing(mine, "-o", forced=False)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")  # a link to nothing is there too
    with pytest.raises(ValueError, match="already exists"):
        refuse_existing(tmp_path / "dangling", "-o", forced=False)
    refuse_existing(mine, "-o", forced=True)
    refuse_existing(tmp_path / "new.de", "-o", forced=False)
    refuse_existing("/dev/stdout", "-o", forced=False)  # a stream: written into, never replaced
    assert mine.read_text() == "a\n"
