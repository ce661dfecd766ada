"""A sweep's out_dir holding another study, a run or someone's results is refused before anything is written
(ablate.sweep.study_folder): a copied sweep file with a new name and its old out_dir damaged the other study."""

from __future__ import annotations

import hashlib

import optuna
import pytest
from sweep_files import VARIANTS, write

from ablate.cli import main
from ablate.sweep.study_folder import study_folder_problem


def study_db(folder, name: str) -> None:
    """Made where SQLAlchemy's URL can name it, then moved in (it would read a `?` in the folder as a query)."""
    made = folder.parent / f"made-{name}"
    made.mkdir(parents=True, exist_ok=True)
    optuna.create_study(study_name=name, storage=f"sqlite:///{made / 'study.db'}")
    folder.mkdir(parents=True, exist_ok=True)
    (made / "study.db").rename(folder / "study.db")


def trial(folder, name: str, study: str) -> None:
    (folder / "trials" / name).mkdir(parents=True)
    (folder / "trials" / name / "trial.yaml").write_text(f"seed: 1\nsweep:\n  study: {study}\n  row: base\n")


def test_a_new_folder_and_the_studys_own_are_fine(tmp_path):
    assert study_folder_problem(tmp_path / "new", "c") is None
    study_db(tmp_path / "own", "c")
    trial(tmp_path / "own", "0000-base", "c")
    (tmp_path / "own" / "results.csv").write_text("row\n")
    assert study_folder_problem(tmp_path / "own", "c") is None
    (tmp_path / "empty").mkdir()
    assert study_folder_problem(tmp_path / "empty", "c") is None


@pytest.mark.parametrize("name", ["a", "lr#1", "sweep?x", "50%"])  # characters a SQLite URI would read otherwise
def test_another_studys_database_or_trials_are_refused_naming_the_study(tmp_path, name):
    study_db(tmp_path / name, "a")
    problem = study_folder_problem(tmp_path / name, "c")
    assert problem.startswith(f"out_dir {tmp_path / name} holds the study 'a' (its study.db), not 'c'")
    assert "or name the sweep 'a' to continue that study" in problem
    trial(tmp_path / "remote", "0000-base", "a")  # a study on a server: its trials name it
    assert "holds trials of the study 'a' (their trial.yaml), not 'c'" in study_folder_problem(tmp_path / "remote", "c")


@pytest.mark.parametrize("what", ["run", "results"])
def test_a_run_or_results_no_sweep_wrote_are_refused(tmp_path, what):
    folder = tmp_path / "x"
    folder.mkdir()
    if what == "run":
        (folder / "config.yaml").write_text("seed: 1\n")
        (folder / "summary.json").write_text("{}")
        assert "holds a training run" in study_folder_problem(folder, "c")
    else:
        (folder / "results.csv").write_text("my own numbers\n")
        assert "holds results.csv that no sweep there wrote" in study_folder_problem(folder, "c")


def test_the_sweep_command_refuses_it_and_changes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    study_db(out, "other")
    (out / "results.csv").write_text("the other study's results\n")
    path = write(tmp_path, VARIANTS + f"out_dir: {out}\n")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()}
    for extra in ([], ["--dry-run"]):
        assert main(["sweep", str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert f"{path}: out_dir {out} holds the study 'other' (its study.db), not 'demo'" in err
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()} == before
