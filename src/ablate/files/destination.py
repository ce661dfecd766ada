"""The one rule for every path a command writes (docs/runs.md, "Where each command writes"): an output is never one
of the command's inputs (the same file by `os.path.samefile`, so a link or a hard link to it counts), never written
through a symbolic link in its last component (a linked parent folder, as on cluster scratch, is fine), and never
inside a study or run folder the command does not own. Each is refused before any work, naming the path, so a typo
in a flag costs an error, not a user's file."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable
from fnmatch import fnmatch
from pathlib import Path

# A run folder: its config beside what training leaves (ablate.run.rundir.RUN_FILES; files/ sits below run/).
_RUN_FILES = ("summary.json", "metrics.csv", "checkpoints", "fingerprint.json")
# A study's own files: its database or journal, its results (a folder is a study by _marked_study).
_STUDY_FILES = ("study.db", "study.log", "results.csv")
# What ablate itself writes in a run or study folder, its record of training: never written by a command's output, even
# in a folder the command may write in (`translate -o RUN/summary.json` is a typo, not a wish). Files ablate reads by
# name are refused even before they exist (a summary.json there would read as a finished run); the checkpoints
# training saved only where they exist (an `ablate average -o RUN/checkpoints/avg.ckpt` the run lacks is welcome).
# Its locks too: a `.run.lock` replaced is a lock no longer held, and a second --resume then trains beside the first.
# A copy of the names run/rundir.py writes (files sits below run): tests/unit/run/test_rundir.py checks it holds them all.
_RUN_RECORDS = ("config.yaml", "hparams.yaml", "metrics.csv", "summary.json", "fingerprint.json", "tokenizer.model",
                "progress.json", "FAILED.txt", "group.json", "train.log", "trial.yaml", "wandb", ".run.lock")  # fmt: skip
_TRAINING_CHECKPOINTS = ("best.ckpt", "last.ckpt", "avg.ckpt", "step=*.ckpt")
ARCHIVE_INCOMPLETE = ".archive-incomplete"  # in an archive while `ablate archive` writes it; `ablate table` refuses it
# A study's database and journal by every name they take (study.db.lock, study.log.heartbeats/, SQLite's study.db-wal).
_STUDY_RECORDS = (*_STUDY_FILES, "results.json", "trials", "groups", ARCHIVE_INCOMPLETE, "study.db*", "study.log*")
_OPEN_FILE = re.compile(r"/proc/[^/]+/fd/\d+")  # /proc/PID/fd/N: a name for a file the process has open


def is_stream(path: str | os.PathLike) -> bool:
    """Whether `path` is a stream, written into and never replaced: a pipe, socket or device (/dev/null, a terminal),
    or a name for a file this process has open (/dev/stdout, /dev/fd/N: its shell's `> log`). Known by what it is,
    not where: a file under /dev/shm (a tmpfs) is a file, checked and replaced whole as any other; a path that does
    not exist is a new file, in /dev too."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) or (stat.S_ISREG(mode) and _names_open_file(path))


def _names_open_file(path: str | os.PathLike) -> bool:
    """Whether `path` reaches a file through /proc/PID/fd/N (/dev/stdout -> /proc/self/fd/1; /dev/fd -> /proc/self/fd)."""
    path = os.path.abspath(path)
    for _ in range(8):  # /dev/stdout is two links from the file; a user's link chain ends sooner
        here = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if _OPEN_FILE.fullmatch(here):
            return True
        if not os.path.islink(here):
            return False
        path = os.path.join(os.path.dirname(here), os.readlink(here))
    return False


def stdout_is(path: str | os.PathLike) -> bool:
    """Whether writing `path` writes this process's standard output (-o /dev/stdout, or a pipe or file stdout is):
    the command's own report then goes to stderr, not into the output."""
    return is_stream(path) and same_as_fd(path, 1)


def same_as_fd(path: str | os.PathLike, fd: int) -> bool:
    """Whether `path` is the file (pipe, terminal) open as descriptor `fd` of this process; False where it is closed."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except OSError:
        return False


def refuse_link(path: str | os.PathLike) -> None:
    """Refuse to write `path` through a symbolic link in its last component: replacing it would change a file
    somewhere else (or, if the link were replaced instead, break what the user linked on purpose)."""
    if os.path.islink(path) and not is_stream(path):
        raise ValueError(
            f"{path} is a symbolic link (to {os.readlink(path)}); ablate never writes through a link: remove the link "
            "or write somewhere else; nothing was written"
        )


def refuse_existing(path: str | os.PathLike, flag: str, forced: bool, instead: str | None = None) -> None:
    """Refuse to write over a file that is already there unless the user passed --force (`forced`): it may be what a
    run produced earlier, or a reference a typo named. A stream (stdout, a pipe) is written into, never replaced."""
    if not forced and os.path.lexists(path) and not is_stream(path):
        instead = instead or f"choose another {flag}"
        raise ValueError(f"{flag} {path} already exists; pass --force to write over it, or {instead}; nothing was written")


def folder_kind(folder: Path) -> str | None:
    """'study' or 'run' when `folder` is one (by what ablate leaves in it), else None. A study by its database, journal or
    archive marker, or results beside its trials: a results.csv of the user's own in a project folder made every output
    below it one "inside the study"."""
    if _marked_study(folder):
        return "study"
    if (folder / "config.yaml").is_file() and any((folder / name).exists() for name in _RUN_FILES):
        return "run"
    return None


def owner_of(path: str | os.PathLike) -> tuple[str, Path] | None:
    """The innermost study or run folder that holds `path` (kind, folder), or None."""
    folder = Path(os.path.abspath(path)).parent
    for here in (folder, *folder.parents):
        if kind := folder_kind(here):
            return kind, here
    return None


def run_of_checkpoint(checkpoint: str | os.PathLike) -> Path | None:
    """The run folder a checkpoint belongs to (RUN/checkpoints/X.ckpt), which commands reading it may write in."""
    checkpoint = Path(checkpoint)
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else None


def unwritable(target: str | os.PathLike) -> str | None:
    """Why `target` could not be replaced, asked before work whose results it is to hold: a folder stands there,
    or the nearest folder above it that exists is a file or one this process may not write in; None if it can."""
    target = Path(target)
    if target.is_dir():
        return f"{target} is a folder, where a file is to be written"
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable (permission denied)"
    return None


def check_output(
    path: str | os.PathLike,
    flag: str,
    inputs: Iterable[tuple[str, str | os.PathLike | None]] = (),
    owns: Iterable[str | os.PathLike | None] = (),
    writes_records: bool = False,
    override: str | None = None,
    forced: bool = False,
) -> None:
    """Refuse `path` (given as `flag`) when it is one of `inputs` ((flag, path) pairs), a symbolic link, or inside a
    study or run folder that is not one of `owns` (nor inside one), or in one that is but replacing what ablate wrote
    there as its record, unless this is the command that `writes_records` (a sweep its results.csv), or the record is
    a checkpoint training saved and the user passed `override`, the flag that says so (`ablate average --force`:
    `forced`), which the refusal names; a run's other records (its config.yaml, summary.json, ...) no flag replaces.
    And a path that could not be written (a folder stands there, or its folder is read-only: `unwritable`)."""
    if is_stream(path):  # written into, never replaced; but a file stdout is (`>> mine.en`) is never an input
        if os.path.isfile(path):
            _refuse_inputs(path, flag, inputs)
        return
    refuse_link(path)
    _refuse_inputs(path, flag, inputs)
    if why := unwritable(path):  # a folder in the way, or a read-only one: found now, not after the work it is to hold
        raise ValueError(f"{flag} {path}: {why}; nothing was written")
    if (found := owner_of(path)) is None:
        return
    kind, folder = found
    real = os.path.realpath(folder)
    for own in filter(None, owns):
        mine = os.path.realpath(own)
        if real == mine or real.startswith(mine.rstrip(os.sep) + os.sep):
            if not writes_records and (record := _record_of(path, folder, kind)):
                checkpoint = override is not None and record.startswith("checkpoints/")
                if checkpoint and forced:
                    return
                raise ValueError(
                    f"{flag} {path} is {record} of the {kind} {folder}, which ablate writes as its record; choose another "
                    f"{flag}{f', or pass {override} to write over it' if checkpoint else ''}; nothing was written"
                )
            return
    raise ValueError(
        f"{flag} {path} is inside the {kind} folder {folder}, which this command does not write in (it holds another "
        f"{kind}'s evidence); choose an output outside it; nothing was written"
    )


def _refuse_inputs(path: str | os.PathLike, flag: str, inputs: Iterable[tuple[str, str | os.PathLike | None]]) -> None:
    for name, source in inputs:
        if source is not None and same_file(path, source):
            raise ValueError(
                f"{flag} {path} is the input {name} {source}: writing it would replace the input; choose another {flag}; "
                "nothing was written"
            )


def _record_of(path: str | os.PathLike, folder: Path, kind: str) -> str | None:
    """The part of the run or study `folder` that `path` would write over, if ablate writes it as a record."""
    parts = Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(folder))).parts
    if not parts:
        return None
    top, exists = parts[0], os.path.lexists(path)
    if kind == "study":
        return top if any(fnmatch(top, name) for name in _STUDY_RECORDS) else None
    if top in _RUN_RECORDS or re.fullmatch(r"resume-\d+", top) or ".before-resume-" in top:
        return top
    if top == "eval" and len(parts) == 2 and (parts[1].endswith(".json") or exists):  # eval/SPLIT.json: read by name
        return f"eval/{parts[1]}"
    if top == "checkpoints" and len(parts) == 2 and exists and any(fnmatch(parts[1], n) for n in _TRAINING_CHECKPOINTS):
        return f"checkpoints/{parts[1]}"
    return None


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether `a` and `b` are one file (by any name: a link or a hard link counts); False if either is missing."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing: not the same file
        return False


def check_run_folder(out: str | os.PathLike, belongs: Callable[[str, Path], bool]) -> None:
    """A run's out_dir (`ablate train`): never a study's folder, nor inside a study or a run where `belongs(kind,
    folder)` says it is not at home (a sweep's own trial, a member in its group are), since `ablate table` would read
    it as one of theirs; refused before any work, naming the folder. Followed through links (a link into a study's
    trials/ is inside it); a study is known by its database, journal, archive marker, or results beside its trials (a
    results.csv of the user's own in a project folder is none)."""
    out = Path(out)
    if _marked_study(out):
        raise ValueError(
            f"out_dir={out} is a study's folder (it holds {_held(out, _STUDY_MARKS)}), where a run is read as one of its "
            "trials; choose another out_dir; nothing was written"
        )
    for folder in Path(os.path.realpath(out)).parents:
        kind = "study" if _marked_study(folder) else "run" if folder_kind(folder) == "run" else None
        if kind is None:
            continue
        if not belongs(kind, folder):
            raise ValueError(
                f"out_dir={out} is inside the {kind} folder {folder} (it holds {_held(folder, _STUDY_MARKS if kind == 'study' else _RUN_FILES)}), "
                f"where a run is read as part of that {kind}; choose another out_dir; nothing was written"
            )
        return


_STUDY_MARKS = ("study.db", "study.log", ARCHIVE_INCOMPLETE, "results.csv", "trials", "groups")


def _marked_study(folder: Path) -> bool:
    if any((folder / name).exists() for name in ("study.db", "study.log", ARCHIVE_INCOMPLETE)):
        return True
    return (folder / "results.csv").is_file() and any((folder / name).is_dir() for name in ("trials", "groups"))


def _held(folder: Path, names: Iterable[str]) -> str:
    return ", ".join(name for name in names if (folder / name).exists())
