"""The study `ablate status TARGET` reads (its body: ablate.sweep.commands): TARGET is a sweep's out_dir (holding
study.db), its sweep file (which names the storage), or a storage URL; the study is found there and only read.
"""

from __future__ import annotations

import re
from pathlib import Path

import optuna

from ablate.messages.redact import redact
from ablate.sweep.journal import journal_path
from ablate.sweep.sqlite_study import sqlite_file, sqlite_url
from ablate.sweep.storage import driver_reason, make_storage, storage_url
from ablate.sweep.study_file import check_present

_URL = re.compile(r"^(sqlite|postgresql|mysql)(\+\w+)?://|^journal:")


def _not_a_study(target: str, path: Path) -> str:
    """Why a folder without study.db is no study to show: a training run's (or a member group's) is said to be one,
    with where its results are, rather than asked for a sweep file it never had."""
    if (path / "group.json").is_file():  # a sweep's member group (ablate.sweep.member_trial): its study is the sweep's
        return f"{target} is one of a sweep's member groups, whose members' runs are in the sweep's trials/: give the sweep's out_dir ({path.parent.parent})"
    if not (path / "config.yaml").is_file() or (path / "trials").is_dir():
        return f"{target} holds no study.db; give the sweep file (it names the storage) or the storage URL"
    members = sorted(p.name for p in path.iterdir() if (p / "config.yaml").is_file())
    if members:  # a member group's folder: each member writes its own results
        return (
            f"{target} is a member group's folder, not a sweep: each member's progress and results are in its own "
            f"folder ({', '.join(members)}: progress.json, summary.json once it ends); ablate status reads a sweep's study"
        )
    return (
        f"{target} is a training run, not a sweep: its progress is in {path / 'progress.json'} and its results in "
        f"{path / 'summary.json'} once it ends; ablate status reads a sweep's study"
    )


def resolve(target: str, study: str | None = None) -> tuple[str, str | None]:
    """(storage URL, study name or None when the storage must say) for TARGET; a missing file is an error, never a
    new empty study."""
    path = Path(target)
    if _URL.match(target):
        url = storage_url(Path("."), override=target)
    elif path.is_file() and path.suffix in (".yaml", ".yml"):
        from ablate.sweep.load import load_sweep

        sweep = load_sweep(path, to_run=False)
        url, study = storage_url(sweep.out_dir, sweep.storage), study or sweep.name
    elif path.is_dir():
        if not check_present(path / "study.db"):
            raise ValueError(_not_a_study(target, path))
        url = sqlite_url((path / "study.db").resolve())
    elif not path.exists() and ":" not in target:  # worded as ablate table and ablate archive word it; a URL mistyped
        # (postgres://..., sqlite:/x.db) is told the forms a storage URL takes, below
        raise FileNotFoundError(f"no such study directory: {target}")
    else:  # a URL of another scheme (postgres://, mariadb://) may hold a password: masked (and remembered) too
        raise ValueError(
            f"{redact(target)} is neither a sweep's out_dir, a sweep file (.yaml) nor a storage URL "
            "(sqlite:///..., postgresql://..., journal:///...)"
        )
    local = journal_path(url) or sqlite_file(url)
    if local is not None and not local.is_file():
        raise ValueError(f"no study at {redact(url)}: {local} does not exist")
    if local is not None and local.stat().st_size == 0:  # opened, it would be made a new, empty storage: status only reads
        raise ValueError(f"no study at {redact(url)}: {local} is an empty file (no sweep has recorded a trial in it)")
    return url, study


def existing_study(url: str, name: str | None, hint: str = "") -> optuna.Study:
    """The study `name` (or the storage's only one, or the one named `hint`) as it is: never created, unlike a
    sweep's ablate.sweep.storage.open_study. A ValueError says what the storage holds instead."""
    import sqlalchemy.exc

    try:
        storage = make_storage(url, read_only=True)
        names = optuna.get_all_study_names(storage)
    except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as e:  # a server down or refusing us
        cause = e.__cause__ if isinstance(e.__cause__, sqlalchemy.exc.SQLAlchemyError) else e  # Optuna's wrapper says less
        raise ValueError(f"cannot open the storage {redact(url)}: {driver_reason(cause)}") from None
    except (OSError, ValueError):  # ablate's own words (a damaged file, a journal line): masked where printed
        raise
    except Exception as e:  # anything else a driver or Optuna raises may quote the URL, or a piece of its password
        raise ValueError(f"cannot open the storage {redact(url)}: {type(e).__name__}: {driver_reason(e)}") from None
    if name is None:
        if len(names) == 1:
            name = names[0]
        elif hint in names:
            name = hint
        else:
            raise ValueError(f"{redact(url)} holds the studies {names or '(none)'}; choose one with --study")
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise ValueError(f"no study named '{name}' at {redact(url)}; it holds {optuna.get_all_study_names(storage)}") from None
