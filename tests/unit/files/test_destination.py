"""The one rule for outputs (issue 38): never an input (links and hard links count), never through a symlink in the
last component, never inside a study or run folder the command does not own; a stream is written, not replaced."""

from __future__ import annotations

import pytest

from ablate.files.destination import ARCHIVE_INCOMPLETE, check_output, folder_kind, is_stream, owner_of, run_of_checkpoint


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
    check_output(run / "eval" / "x.json", "--out", owns=[study])  # inside a run inside the study it owns
    check_output(tmp_path / "elsewhere" / "x", "-o")
    (tmp_path / "arch").mkdir()
    (tmp_path / "arch" / ARCHIVE_INCOMPLETE).touch()
    assert folder_kind(tmp_path / "arch") == "study"


def test_streams_and_linked_parent_folders_are_written(tmp_path):
    assert is_stream("/dev/null") and is_stream("/dev/stdout") and not is_stream(tmp_path / "x")
    check_output("/dev/stdout", "--output", [("--input", tmp_path / "x")])
    (tmp_path / "real").mkdir()
    (tmp_path / "scratch").symlink_to(tmp_path / "real", target_is_directory=True)
    check_output(tmp_path / "scratch" / "out.txt", "--output")


def test_run_of_checkpoint(tmp_path):
    assert run_of_checkpoint(tmp_path / "r" / "checkpoints" / "best.ckpt") == tmp_path / "r"
    assert run_of_checkpoint(tmp_path / "avg.ckpt") is None
