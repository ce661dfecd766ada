"""`ablate archive STUDY DEST`: what a study found, without checkpoints or corpus text, small enough to commit.

A sweep's out_dir holds the Optuna study (SQLite) and one run directory per trial: configs, summary, metrics,
evaluation records, checkpoints and W&B files. The archive keeps what `ablate table` reads and what a rerun of the
sweep needs to skip finished rows: the study database, and of each finished trial every file but its checkpoints and
W&B files, with its evaluation records made text-free (`ablate.evaluation.records.text_free`: per-sentence BLEU statistics
and NLL, no sentence of the corpus). So a study longer than one machine's lease goes on elsewhere: copy the archive
into the sweep's out_dir and run the sweep again; `ablate table DEST` tabulates it as it stands.

Archiving never removes anything, checks before it writes anything, and is written whole or not at all (archive.staging). A file DEST already holds is replaced by
the study's newer one only when both have a database and the study's holds every trial DEST's has finished (so an
empty, older or other study archived over an archive by mistake, or a copy another machine continued from the same
archive, is refused); otherwise only new files are added, and a different one is refused. A study without a database
over an archive with one is refused. A link in a run is archived as what it links to; a finished run without its
config.yaml is archived as it is, and reported (its database marks it finished).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ablate.archive.staging import exclusive, staging
from ablate.archive.study_db import DATABASE, check_not_older, database_copy, finished_run_dirs, finished_trials, trial_run_dirs
from ablate.evaluation.records import EvalFileError, text_free
from ablate.files.atomic import DiskFull, replacing
from ablate.files.destination import check_output, folder_kind, unwritable
from ablate.files.json_file import read_json
from ablate.run.rundir import RUN_TOKENIZER
from ablate.sweep.study_file import check_present, study_names

SKIPPED_DIRS = frozenset({"checkpoints", "wandb"})  # weights and W&B's own copy of the run: large, and not evidence


@dataclass
class ArchiveReport:
    trials: list[str] = field(default_factory=list)  # run directories archived, relative to the study
    unfinished: list[str] = field(default_factory=list)  # trial directories with no summary.json: left out
    # trial directories with a summary.json that the database does not mark finished (a trial cut after its run
    # wrote its summary, or one whose row failed after it: the sweep trains the row again): left out
    not_finished_in_db: list[str] = field(default_factory=list)
    evaluated: list[str] = field(default_factory=list)  # runs scored on the asked split first
    no_config: list[str] = field(default_factory=list)  # archived runs with a summary.json but no config.yaml
    no_trial: list[str] = field(default_factory=list)  # trial directories with a summary.json no trial names: left out
    gone: list[str] = field(default_factory=list)  # trial directories the database marks finished that are not there
    lost: list[str] = field(default_factory=list)  # trial directories the database marks finished, with no summary.json
    database: bool = False


def archive(
    study: Path,
    dest: Path,
    evaluate: Callable[[Path], object] | None = None,
    split: str = "test",
    scorable: Callable[[list[Path]], None] | None = None,
) -> ArchiveReport:
    """Copy `study`'s evidence into `dest` (see the module docstring); `evaluate(run_dir)` writes a finished run's
    eval/{split}.json first where it has none (its checkpoints are not archived, so later is too late), once
    `scorable(run_dirs)` has had its say on all of them (it raises to refuse, before any is scored)."""
    study, dest = study.resolve(), dest.resolve()
    if not study.is_dir():
        raise FileNotFoundError(f"no such study directory: {study}")
    # A sweep's out_dir, or a folder of runs trained by hand (`ablate table` reads both); not a run, nor a folder of none
    if folder_kind(study) == "run" or (folder_kind(study) is None and not next(study.rglob("summary.json"), None)):
        raise ValueError(
            f"{study} is {'a run' if folder_kind(study) == 'run' else 'no study'}: archive a sweep's out_dir, or a folder "
            "of runs (each a config.yaml and summary.json); nothing was written"
        )
    if dest == study or study in dest.parents:
        raise ValueError(f"the archive {dest} would be inside the study {study}; archive somewhere else")
    if dest in study.parents:  # `ablate archive runs/sweeps/x .`: DEST would then be a study holding every run below it
        raise ValueError(
            f"the archive {dest} would hold the study {study} (a folder above it), and every run under it would then be "
            f"read as the archive's; archive into a folder of its own, e.g. {dest / (study.name + '-archive')}; nothing was written"
        )
    if dest.is_dir() and not (dest / DATABASE).exists() and (foreign := _runs_not_of(study, dest)):
        raise ValueError(
            f"{dest} already holds runs that are not the study's ({', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}), "
            "and would be read as one study with them: archive into a folder of its own; nothing was written"
        )
    if folder_kind(dest) == "run":
        raise ValueError(f"{dest} holds a training run (config.yaml beside its files): archive into a folder of its own")
    # Not inside another study or run, nor unwritable (DEST a file, or read-only): refused before the runs are scored
    check_output(dest / DATABASE, "the archive", owns=[dest], writes_records=True)
    with exclusive(dest) as sole:  # from the check that DEST holds nothing newer to the last file moved in
        return _archive_into(study, dest, evaluate, scorable, split, sole)


def _archive_into(study: Path, dest: Path, evaluate: Callable | None, scorable: Callable | None, split: str, sole: bool) -> ArchiveReport:
    source_db = study / DATABASE
    has_db = check_present(source_db)
    if has_db:  # a corrupt, empty or locked database is refused before anything is copied
        check_not_older(source_db, finished_trials(source_db), dest / DATABASE)
    elif (dest / DATABASE).exists():
        raise ValueError(
            f"{dest / DATABASE} exists but the study {study} has no {DATABASE}: not archiving a study without its "
            "database over an archive with one (nothing shows the study is newer, and the archive's database would "
            "not match its trials); archive the folder that holds the study's database, or into a new folder"
        )
    report = ArchiveReport(database=has_db)
    # Written into a temporary folder, moved in at the end (ablate.archive.staging). The database is copied first (a
    # busy one fails before anything is written) and moved in last, so every trial it marks finished had its summary
    # when the runs were walked after it.
    with staging(dest, sole) as stage, database_copy(source_db, stage / DATABASE) if has_db else contextlib.nullcontext() as copied:
        _archive_runs(study, dest, stage, report, split, copied, evaluate, scorable)
    return report


def _archive_runs(
    study: Path, dest: Path, stage: Path, report: ArchiveReport, split: str, database: Path | None, evaluate, scorable
) -> None:
    runs = _finished_runs(study, report, database)
    record = Path("eval") / f"{split}.json"
    to_score = [r for r in runs if evaluate is not None and (r / "config.yaml").is_file() and not (r / record).is_file()]
    # A refusal comes before scoring, which can take minutes a run; a record the archive holds that scoring would
    # write anew is refused with the rest.
    _contents(study, dest, runs, report, scoring=[dest / r.relative_to(study) / record for r in to_score])
    if to_score and scorable is not None:
        scorable(to_score)
    for run in to_score:
        evaluate(run)
        report.evaluated.append(str(run.relative_to(study)))
    for target, data in _contents(study, dest, runs, report).items():  # again, with the records scoring added
        _write_atomic(stage / target.relative_to(dest), data)


def _contents(study: Path, dest: Path, runs: list[Path], report: ArchiveReport, scoring: list[Path] = ()) -> dict[Path, bytes]:
    """Archive file -> what it is to hold, once every file is checked writable and none the archive holds would
    change without a database that shows the study newer (`scoring`: archive files that scoring is yet to make)."""
    files: dict[Path, tuple[Path, bool]] = {}  # archive file -> the study's file, and whether it is a record
    for run in runs:
        files.update(_run_files(run, dest / run.relative_to(study)))
    _check_writable([*files, *scoring])
    verified = report.database and (dest / DATABASE).is_file()  # the study's database holds every trial the archive's does
    contents = {target: _content(source, record) for target, (source, record) in files.items()}  # records checked first
    changed = [str(t.relative_to(dest)) for t, data in contents.items() if not verified and t.exists() and t.read_bytes() != data]
    changed += [str(t.relative_to(dest)) for t in scoring if not verified and t.exists()]
    if changed:
        raise ValueError(
            f"{dest} already holds {len(changed)} files that the study {study} has different ({', '.join(changed[:5])}"
            + (" ..." if len(changed) > 5 else "")
            + "): not replacing them, as only a study whose database holds every finished trial of the archive's may "
            + f"(the {'archive' if report.database else 'study'} has no {DATABASE}); archive into a new folder instead"
        )
    return contents


def _runs_not_of(study: Path, dest: Path) -> list[str]:
    """The runs in `dest` (an archive of `study` without a database yet, or a folder of the user's) that the study has
    no folder for: `ablate archive S runs` made runs/ a study holding every run in it."""
    runs = sorted({p.parent for p in dest.rglob("summary.json")} | {p.parent for p in dest.rglob(DATABASE)})
    return [str(r.relative_to(dest)) for r in runs if not r.name.startswith(".") and not (study / r.relative_to(dest)).is_dir()]


def _finished_runs(study: Path, report: ArchiveReport, database: Path | None) -> list[Path]:
    """Every run directory with a summary.json (outside checkpoints and W&B files) but a sweep's trial the copied
    `database` does not mark finished, recording in `report` the runs and the trial directories left out."""
    runs = sorted(here for here, names in _walk(study) if "summary.json" in names and here != study)
    finished = finished_run_dirs(database) if database is not None else None
    if finished is not None:  # a run the sweep will train again is not evidence: tabulated, it would count twice
        left = [r for r in runs if r.parent == study / "trials" and r.name not in finished]
        named = trial_run_dirs(database)
        report.not_finished_in_db = [r.name for r in left if r.name in named]
        report.no_trial = [r.name for r in left if r.name not in named]  # renamed, or copied in: no trial will train it
        runs = [r for r in runs if r not in left]
        if len(study_names(database)) == 1:  # a storage several studies share: another's trials ran elsewhere
            here = {p.name for p in (study / "trials").iterdir()} if (study / "trials").is_dir() else set()
            report.gone = sorted(finished - here)  # the archive's database marks them finished too, with no files
    for run in runs:
        if not (run / "config.yaml").is_file():  # damaged: kept as it is (the database marks it finished), reported
            report.no_config.append(str(run.relative_to(study)))
        report.trials.append(str(run.relative_to(study)))
    trials = study / "trials"
    if trials.is_dir():
        report.unfinished = sorted(p.name for p in trials.iterdir() if p.is_dir() and not (p / "summary.json").exists())
        report.lost = [name for name in report.unfinished if finished is not None and name in finished]
        report.unfinished = [name for name in report.unfinished if name not in report.lost]
    return runs


def _run_files(run: Path, to: Path) -> dict[Path, tuple[Path, bool]]:
    """A run's files to archive under `to`, as archive file -> (run file, an evaluation record?): all but
    checkpoints, W&B files and transient files. A link is archived as the file it links to (a regular file in the
    archive), a broken one is refused: its evidence is missing."""
    files = {}
    for here, names in _walk(run):
        rel = here.relative_to(run)
        for name in names:
            path = here / name
            if _transient(name):
                continue
            if not path.exists():
                raise FileNotFoundError(
                    f"{path}: a link to {os.readlink(path)}, which does not exist: the run's evidence is missing; "
                    "restore it (or remove the link) and archive again"
                )
            if path.is_file():
                files[to / rel / name] = (path, rel.parts[:1] == ("eval",) and path.suffix == ".json")
    return files


def _walk(root: Path) -> Iterator[tuple[Path, list[str]]]:
    """(folder, its file names) of `root` and every folder under it but checkpoints and W&B files, following links
    to folders (none is silently left out), except one to a folder it is in (no end to follow)."""
    for top, dirs, names in os.walk(root, onerror=_unreadable, followlinks=True):
        here = Path(top)
        rel = here.relative_to(root)
        if os.path.realpath(here) in {os.path.realpath(root.joinpath(*rel.parts[:i])) for i in range(len(rel.parts))}:
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        yield here, sorted(names)


def _unreadable(e: OSError) -> None:
    raise ValueError(f"{e.filename}: cannot read it ({e.strerror or e}), so its evidence cannot be archived") from None


def _content(path: Path, record: bool) -> bytes:
    """What the archive keeps of a run's file: its bytes, or an evaluation record's text-free form."""
    if not record:
        return path.read_bytes()
    data = read_json(path, "evaluation file", EvalFileError)
    try:
        stripped = text_free(data)
    except EvalFileError as e:
        raise EvalFileError(f"{path}: {e}") from None
    return json.dumps(stripped, ensure_ascii=False).encode()


def _transient(name: str) -> bool:
    """Lock files, atomic writes' temporaries, checkpoints outside checkpoints/, and a resumed run's copy of its
    tokenizer (RUN_TOKENIZER: a checkpoint's, which resumes encode with; subwords learnt from the corpus, and most of
    an archived run's bytes): never evidence."""
    return name.startswith(".") or name.endswith((".lock", ".tmp", ".ckpt")) or name == RUN_TOKENIZER


def _check_writable(files: list[Path]) -> None:
    """Refuse, before anything is written, a file the archive cannot write (`ablate.files.destination.unwritable`)."""
    if reason := next(filter(None, map(unwritable, files)), None):
        raise ValueError(f"{reason}, so the archive cannot be written there; move it away or archive elsewhere")


def _write_atomic(target: Path, data: bytes) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with replacing(target) as tmp:
            tmp.write_bytes(data)
    except DiskFull:
        raise
    except OSError as e:
        raise ValueError(f"{e.filename or target}: cannot write the archive ({e.strerror or e})") from None
