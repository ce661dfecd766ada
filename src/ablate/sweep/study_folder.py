"""A sweep's out_dir belongs to its study. A sweep file copied with a new `name` but its old `out_dir` would add its
study to the other's database, write its trials beside the other's (failing them, and overwriting their train.log and
trial.yaml) and replace its results.csv; an out_dir that is a training run would get a study inside it. So an out_dir
that holds another study (its study.db or its trials name another), a run, or results no sweep there wrote is refused
before anything is written, naming what it holds."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ablate.config import ConfigError
from ablate.files.destination import folder_kind
from ablate.files.yaml_file import read_yaml
from ablate.sweep.study_file import study_names

RESULTS = ("results.csv", "results.json")
_LOOKED_AT = 3  # trial folders whose study is read: a folder of another study shows it in its first


def study_folder_problem(out_dir: Path, study: str) -> str | None:
    """Why the sweep of `study` cannot write in `out_dir`, or None (a new folder, or its own study's)."""
    if not out_dir.is_dir():
        return None
    keep = "give this sweep an out_dir of its own"
    if folder_kind(out_dir) == "run":
        return f"out_dir {out_dir} holds a training run (config.yaml beside its files); {keep}; nothing was written"
    names = _database_studies(out_dir / "study.db")
    if names and study not in names:
        listed = ", ".join(f"'{n}'" for n in names)
        return (
            f"out_dir {out_dir} holds the study {listed} (its study.db), not '{study}': {keep}, or name the sweep "
            f"{listed.split(', ')[0]} to continue that study; nothing was written"
        )
    other = next((s for s in _trial_studies(out_dir / "trials") if s != study), None)
    if other is not None:
        return (
            f"out_dir {out_dir} holds trials of the study '{other}' (their trial.yaml), not '{study}': {keep}, or name "
            f"the sweep '{other}' to continue that study; nothing was written"
        )
    if not names and not (out_dir / "trials").exists() and (found := [n for n in RESULTS if (out_dir / n).exists()]):
        return f"out_dir {out_dir} holds {' and '.join(found)} that no sweep there wrote (no study.db, no trials/): {keep}; nothing was written"
    return None


def _database_studies(db: Path) -> list[str]:
    """The study names in a SQLite study.db; none where there is no such file or it cannot be read (the storage's own
    check names a damaged one)."""
    with contextlib.suppress(ValueError):
        return study_names(db) if db.is_file() else []
    return []


def _trial_studies(trials: Path) -> list[str]:
    """The studies the first trial folders under `trials` were written for (their trial.yaml's sweep.study)."""
    found = []
    folders = sorted(p for p in trials.iterdir() if (p / "trial.yaml").is_file())[:_LOOKED_AT] if trials.is_dir() else []
    for folder in folders:
        with contextlib.suppress(ConfigError, OSError):
            config = read_yaml(folder / "trial.yaml")
            section = config.get("sweep") if isinstance(config, dict) else None
            name = section.get("study") if isinstance(section, dict) else None
            if isinstance(name, str):
                found.append(name)
    return found
