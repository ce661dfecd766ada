"""`ablate archive STUDY DEST`: what a study found, without checkpoints or corpus text, small enough to commit.

A sweep's out_dir holds the Optuna study (SQLite) and one run directory per trial: configs, summary, metrics,
evaluation records, checkpoints and W&B files. The archive keeps what `ablate table` reads and what a rerun of the
sweep needs to skip finished rows: the study database, and of each finished trial every file but its checkpoints and
W&B files, with its evaluation records made text-free (`ablate.eval_file.text_free`: per-sentence BLEU statistics
and NLL, no sentence of the corpus). So a study longer than one machine's lease goes on elsewhere: copy the archive
into the sweep's out_dir and run the sweep again; `ablate table DEST` tabulates it as it stands.

Archiving never removes anything: files of trials DEST already holds are replaced by the study's newer ones, and
a study database that lacks any trial DEST's has finished is refused (an empty, older or other study archived over
an archive by mistake, or a copy another machine continued from the same archive).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ablate.atomic import replacing
from ablate.eval_file import EvalFileError, text_free

SKIPPED_DIRS = frozenset({"checkpoints", "wandb"})  # weights and W&B's own copy of the run: large, and not evidence
DATABASE = "study.db"  # the sweep's default storage (ablate.sweep.storage); a server or shared journal needs no copy


@dataclass
class ArchiveReport:
    trials: list[str] = field(default_factory=list)  # run directories archived, relative to the study
    unfinished: list[str] = field(default_factory=list)  # trial directories with no summary.json: left out
    evaluated: list[str] = field(default_factory=list)  # runs scored on the asked split first
    database: bool = False


def archive(study: Path, dest: Path, evaluate: Callable[[Path], object] | None = None, split: str = "test") -> ArchiveReport:
    """Copy `study`'s evidence into `dest` (see the module docstring); `evaluate(run_dir)` writes a finished run's
    eval/{split}.json first where it has none (its checkpoints are not archived, so later is too late)."""
    study, dest = study.resolve(), dest.resolve()
    if not study.is_dir():
        raise FileNotFoundError(f"no such study directory: {study}")
    if dest == study or study in dest.parents:
        raise ValueError(f"the archive {dest} would be inside the study {study}; archive somewhere else")
    report = ArchiveReport()
    if (study / DATABASE).is_file():
        _check_not_older(study / DATABASE, dest / DATABASE)
    for summary in sorted(study.rglob("summary.json")):
        run = summary.parent
        if not (run / "config.yaml").is_file() or SKIPPED_DIRS & set(run.relative_to(study).parts):
            continue
        if evaluate is not None and not (run / "eval" / f"{split}.json").is_file():
            evaluate(run)
            report.evaluated.append(str(run.relative_to(study)))
        _copy_run(run, dest / run.relative_to(study))
        report.trials.append(str(run.relative_to(study)))
    trials = study / "trials"
    if trials.is_dir():
        report.unfinished = sorted(p.name for p in trials.iterdir() if p.is_dir() and not (p / "summary.json").is_file())
    if (study / DATABASE).is_file():
        _backup_database(study / DATABASE, dest / DATABASE)
        report.database = True
    return report


def _copy_run(run: Path, to: Path) -> None:
    for path in sorted(run.rglob("*")):
        rel = path.relative_to(run)
        if not path.is_file() or path.is_symlink() or SKIPPED_DIRS & set(rel.parts[:-1]) or _transient(path.name):
            continue
        target = to / rel
        if rel.parts[0] == "eval" and path.suffix == ".json":
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                raise EvalFileError(f"{path}: not a readable evaluation file ({type(e).__name__}: {e})") from None
            try:
                stripped = text_free(data)
            except EvalFileError as e:
                raise EvalFileError(f"{path}: {e}") from None
            _write_atomic(target, json.dumps(stripped, ensure_ascii=False).encode())
        else:
            _write_atomic(target, path.read_bytes())


def _transient(name: str) -> bool:
    """Lock files, atomic writes' temporaries and checkpoints outside checkpoints/: never evidence."""
    return name.startswith(".") or name.endswith((".lock", ".tmp", ".ckpt"))


def _write_atomic(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with replacing(target) as tmp:
        tmp.write_bytes(data)


def _finished_trials(db: Path) -> set[tuple[str, int, str]]:
    """(study, trial number, start time) of the COMPLETE and PRUNED trials in an Optuna SQLite database (read-only, so
    a live study is not disturbed): a trial's identity across copies of the database."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            rows = con.execute(
                "SELECT s.study_name, t.number, t.datetime_start FROM trials t JOIN studies s ON s.study_id = t.study_id "
                "WHERE t.state IN ('COMPLETE', 'PRUNED')"
            ).fetchall()
    except sqlite3.Error as e:
        raise ValueError(f"{db}: not a readable Optuna study database ({e})") from None
    return {(name, number, str(start)) for name, number, start in rows}


def _check_not_older(source: Path, existing: Path) -> None:
    """Replace an archive's database only with one that holds every trial it finished: not an older or empty study,
    nor a copy that another machine continued from the same archive (its own finished trials would be lost)."""
    if not existing.is_file():
        return
    lost = sorted(_finished_trials(existing) - _finished_trials(source))
    if lost:
        named = ", ".join(f"{study} trial {number}" for study, number, _ in lost[:5]) + (" ..." if len(lost) > 5 else "")
        raise ValueError(
            f"{existing} holds {len(lost)} finished trials the study's {source} does not ({named}): not replacing it, "
            "which would lose them (an older study, another study, or one that another machine continued from the same "
            "archive); archive into a new folder instead"
        )


def _backup_database(source: Path, target: Path) -> None:
    """A consistent copy of a database that workers may be writing (SQLite's online backup), swapped in atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with (
        replacing(target) as tmp,
        contextlib.closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src,
        contextlib.closing(sqlite3.connect(tmp)) as out,
    ):
        src.backup(out)


def archive_cli(args) -> int:
    study = Path(args.study)
    if study.is_file():  # a sweep file: archive its out_dir
        from ablate.sweep import load_sweep

        study = load_sweep(study).out_dir
    evaluate = None
    if args.split:
        from ablate.table.evaluation import evaluate_run, selected_checkpoint, wanted_checkpoint

        def evaluate(run: Path) -> None:
            if selected_checkpoint(run) is None:
                raise FileNotFoundError(f"{run}: no eval/{args.split}.json and no {wanted_checkpoint(run)} to make one from")
            print(f"evaluating {selected_checkpoint(run)} on the {args.split} split ...")
            evaluate_run(run, args.split, args.device)

    report = archive(study, Path(args.dest), evaluate, args.split or "test")
    print(
        f"archived {len(report.trials)} finished runs of {study} into {args.dest}"
        + (f" (scored {len(report.evaluated)} on {args.split} first)" if report.evaluated else "")
        + (", with the study database" if report.database else ", no study database (not SQLite in the study's folder)")
    )
    if report.unfinished:
        print(
            f"left out {len(report.unfinished)} unfinished trials (a rerun of the sweep trains them again): {', '.join(report.unfinished)}"
        )
    return 0
