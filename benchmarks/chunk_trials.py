"""A study's trials as benchmarks/study_chunk.py reads them (from a copy of its database), the run directories that
wrote a summary, what makes an archive other than exactly the study's finished trials, and what a chunk finished,
cut and left."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import optuna

from ablate.archive.study_db import DATABASE
from ablate.sweep.ledger import row_of


@dataclass(frozen=True)
class TrialRecord:
    number: int
    state: str
    row: str | None
    seed: int | None
    minutes: float | None
    attrs: dict


def read_trials(db: Path, study: str) -> list[TrialRecord]:
    """The study's trials, read from a copy of its database, so neither the archive's nor a live one is touched."""
    if not db.is_file():
        return []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / DATABASE
        shutil.copyfile(db, copy)
        storage = optuna.storages.RDBStorage(f"sqlite:///{copy}")
        try:
            found = optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
        except KeyError:
            raise SystemExit(f"{db} holds no study named '{study}' (it has {optuna.get_all_study_names(storage)})") from None
        finally:
            storage.engine.dispose()
    out = []
    for t in found:
        row, seed = row_of(t) or (None, None)
        took = (t.datetime_complete - t.datetime_start).total_seconds() / 60 if t.datetime_complete and t.datetime_start else None
        out.append(TrialRecord(t.number, t.state.name, row, seed, took, dict(t.user_attrs)))
    return out


def run_dirs(root: Path) -> dict[int, Path]:
    """Trial number -> run directory (trials/NNNN-name) of every run under `root` that wrote its summary."""
    trials = root / "trials"
    found = sorted(trials.glob("[0-9][0-9][0-9][0-9]-*/summary.json")) if trials.is_dir() else []
    return {int(p.parent.name[:4]): p.parent for p in found}


def archive_problems(root: Path, trials: list[TrialRecord], split: str) -> list[str]:
    """What makes `root` (an archive, or a study's out_dir) other than exactly the study's finished trials."""
    done = {t.number: t for t in trials if t.state == "COMPLETE"}
    runs = run_dirs(root)
    problems = [f"{runs[n].name}: a run whose trial the study does not mark finished" for n in sorted(set(runs) - set(done))]
    problems += [
        f"trial {n} ({done[n].row}, seed {done[n].seed}) finished, but {root} holds no run of it" for n in sorted(set(done) - set(runs))
    ]
    seen: dict[tuple, int] = {}
    for t in done.values():
        if (t.row, t.seed) in seen:
            problems.append(f"row {t.row} seed {t.seed} finished twice: trials {seen[(t.row, t.seed)]} and {t.number}")
        seen[(t.row, t.seed)] = t.number
    problems += [f"{d.name}: no eval/{split}.json" for n, d in sorted(runs.items()) if not (d / "eval" / f"{split}.json").is_file()]
    problems += [f"{p.relative_to(root)}: a checkpoint in the archive" for p in root.rglob("*.ckpt")]
    return problems


def summarize(sweep, before: list[TrialRecord], after: list[TrialRecord]) -> dict:
    """What this chunk finished, cut and failed (trials that ended here: new ones, or ones queued by an earlier chunk),
    and what is left of the sweep's rows."""
    ended_before = {t.number for t in before if t.state not in ("WAITING", "RUNNING")}
    ended = [t for t in after if t.number not in ended_before and t.state != "WAITING"]

    def brief(t: TrialRecord) -> dict:
        return {"trial": t.number, "row": t.row, "seed": t.seed, "minutes": None if t.minutes is None else round(t.minutes, 2)}

    def failed(t: TrialRecord) -> bool:  # by itself: not preempted, not a claim that never ran ("[not run] ...")
        return t.state == "FAIL" and "fail_reason" in t.attrs and not str(t.attrs["fail_reason"]).startswith("[not run]")

    done = {(t.row, t.seed) for t in after if t.state == "COMPLETE"}
    return {
        "finished": [brief(t) for t in ended if t.state == "COMPLETE"],
        "cut": [brief(t) for t in ended if t.state in ("FAIL", "RUNNING") and "fail_reason" not in t.attrs],
        "failed": [brief(t) | {"reason": t.attrs["fail_reason"]} for t in ended if failed(t)],
        "left": [[row, seed] for row, seed in sweep.rows() if (row, seed) not in done],
        "finished_in_all": len(done),
    }
