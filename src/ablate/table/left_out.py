"""The runs of a study `ablate table` does not tabulate, each with why, so no seed or row goes missing in silence.

A run folder (config.yaml) without summary.json: diverged (its trial's fail reason, or its train.log, says non-finite
weights or loss), failed (that reason), pruned, stopped or still running, or finished with its summary since lost; an
earlier attempt of a row and seed another run tabulates is named as that. A member group's own folder (its checkpoint
and log) is no run: its members' folders are. A trial the study database (SQLite, `study.db` in the folder) marks
finished or failed whose run folder is gone is named too, and a trial folder with a summary.json that the database
marks failed or running (`in_study`) is an attempt, not a seed. Rows none of whose runs finished, all diverged, are
`diverged` rows: the table shows them as such (ablate.table.compare); a row only some of whose seeds diverged is
scored on the others, and a note says so (ablate.table.caveats.partly_diverged). A run a sweep's pruner stopped, with its
summary.json, is left out of the final table by ablate.table.finished_runs.unpruned.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ablate.config import flatten
from ablate.files.yaml_file import read_yaml
from ablate.run.exits import FAILED_FILE
from ablate.sweep.study_file import check_present, read
from ablate.table.finished_runs import Run, row_of_folder

DIVERGED = re.compile(r"non-finite|diverged|FloatingPointError|\bnan\b", re.IGNORECASE)
_ERROR = re.compile(r"^[\w.]*(Error|Exception|Interrupt)\b|^ablate\b.*error")
UNFINISHED = ("FAIL", "RUNNING", "WAITING")  # a trial's states in which its folder's summary is no finished seed
NOT_RUN = "[not run] "  # a bookkeeping trial's fail_reason prefix (ablate.sweep.ledger.BOOKKEEPING): it ran no row


@dataclass
class LeftOut:
    runs: dict[str, str] = field(default_factory=dict)  # run folder (or trial) -> why it is not tabulated
    diverged: dict[str, tuple[str, dict]] = field(default_factory=dict)  # row none of whose runs finished, all diverged -> (why, config)
    some_diverged: dict[str, list] = field(default_factory=dict)  # row some of whose runs finished -> the seeds that diverged
    rows: set[str] = field(default_factory=set)  # the rows the runs and trials left out are of, where known

    def not_run(self, planned: list[str], tabulated: set[str], sweep_file) -> None:
        """The rows of `sweep_file` (`planned`) of which the study holds no run or trial at all (added since the
        sweep ran), named: a table of the rest would read as the whole study."""
        for row in planned:
            if row not in tabulated and row not in self.rows:
                self.runs[f"row {row}"] = (
                    f"not run: {sweep_file} names it, but the study holds no run or trial of it (added since the sweep ran?); `ablate sweep {sweep_file}` trains it"
                )


Trial = tuple[str, str | None, str | None, object]  # (state, fail reason, row, seed) of a trial in study.db
Trials = tuple[dict[str, Trial], str | None]  # study_trials: by run folder, and a note


def study_trials(root: Path) -> Trials:
    """The trials of the sweep's study.db under `root` (see `_trials`), read once for in_study and left_out: a sweep
    still running may change the database between two reads, and a run neither tabulated nor left out would go
    missing in silence."""
    return _trials(root / "study.db")


def in_study(root: Path, runs: list[Run], trials: Trials | None = None) -> list[Run]:
    """The runs a sweep's study.db does not contradict. A trial folder whose summary.json its trial in the database
    calls failed or running is an attempt the sweep trains again (a group stopped as its members ended, whose rows a
    rerun regrouped; a study still running): tabulated, its seed would count twice. left_out names it."""
    trials, _ = trials or study_trials(root)
    home = (root / "trials").resolve()
    return [r for r in runs if not (r.run_dir is not None and _unfinished(Path(r.run_dir), home, trials))]


def _unfinished(folder: Path, home: Path, trials: dict) -> bool:
    trial = trials.get(folder.name)
    return trial is not None and trial[0] in UNFINISHED and folder.resolve().parent == home


def left_out(root: Path, runs: list[Run], trials: Trials | None = None) -> LeftOut:
    """Every run under `root` (and trial of its study.db: `trials` as in_study read them) that `runs` does not hold,
    with why."""
    trials, db_note = trials or study_trials(root)
    trials = dict(trials)  # popped below as runs account for them
    tabulated = {(r.row, r.config.get("seed")): r.source for r in runs}
    taken = [Path(r.run_dir).resolve() for r in runs if r.run_dir is not None]
    for run in runs:  # a tabulated run's trials (an attempt it continued from included) are accounted for
        if run.run_dir is not None:
            trials.pop(Path(run.run_dir).name, None)
    out = LeftOut()
    by_row: dict[str, list[tuple[str, dict]]] = {}
    attempts: dict[str, str] = {}  # queued_name(row, seed) -> the left-out folder of that row and seed
    folders = [p.parent for p in sorted(root.rglob("config.yaml")) if "wandb" not in p.parts]  # tabulated ones: `taken`
    folders = [f for f in folders if not _is_group(_config(f))]  # a member group's own files; its members are the runs
    for folder in folders:
        if any(folder.resolve().is_relative_to(t) for t in taken) or any(o != folder and folder.is_relative_to(o) for o in folders):
            continue  # a file inside a tabulated run (or another left-out one), not a run of its own
        config = _config(folder)
        row, seed = str(config.get("sweep.row") or row_of_folder(folder, config)), config.get("seed")  # a member's: its group's
        why = _why(folder, trials.pop(folder.name, None))
        if (row, seed) in tabulated:
            why = f"an earlier attempt of row {row} seed {seed}, which {tabulated[row, seed]} tabulates ({why})"
        else:
            by_row.setdefault(row, []).append((why, config))
            attempts[queued_name(row, seed)] = str(folder)
        out.runs[str(folder)] = why
        out.rows.add(row)
    for name, (state, reason, row, seed) in trials.items():  # trials whose run folder is gone (or not archived), or none yet
        if row is not None:
            out.rows.add(row)
        if state == "WAITING" and name in attempts:  # an interrupted attempt queued again: one seed, named once
            out.runs[attempts[name]] += "; queued in study.db to continue from it"
        elif state == "WAITING":
            out.runs[name] = (
                "not run yet: queued in study.db (a sweep stopped before it, or still running); `ablate sweep` trains it when run again"
            )
        elif state == "COMPLETE":
            out.runs[f"trial {name}"] = "no run folder: study.db marks it COMPLETE, but trials/" + name + " is gone"
        elif (state == "RUNNING" or (state == "FAIL" and reason is None)) and not _holds(tabulated, row, seed):
            # interrupted, killed or running, its folder not here (an archive keeps finished runs only): never silent
            out.runs[f"trial {name}"] = (
                "starting (its run folder holds no config.yaml yet: its data, or its first step), or stopped there"
                if (root / "trials" / name).is_dir()
                else "stopped before it finished (interrupted or killed), or still running; its run folder is not here"
            ) + ": not a finished seed; `ablate sweep` continues it when run again"
        elif state in ("FAIL", "PRUNED") and reason is not None and not reason.startswith(NOT_RUN):
            out.runs[f"trial {name}"] = why = f"{_state(state, reason)}; its run folder is not here"
            if row is not None:
                by_row.setdefault(row, []).append((why, {} if seed is None else {"seed": seed}))  # named by its seed
    if db_note:
        out.runs[str(root / "study.db")] = db_note
    rows = {r.row for r in runs}
    for row, attempts in by_row.items():
        if row not in rows and all(why.startswith("diverged") for why, _ in attempts):
            out.diverged[row] = attempts[0]
        elif row in rows and (seeds := {config.get("seed"): None for why, config in attempts if why.startswith("diverged")}):
            out.some_diverged[row] = list(seeds)  # a seed whose retry diverged again is one seed
    return out


def _holds(tabulated: dict, row: str | None, seed) -> bool:
    """Whether the table has a run of this row and seed; of the row at all, for a trial queued with no seed of its own
    (a sweep without `seeds`: each row once, at the base's seed)."""
    return (row, seed) in tabulated or (seed is None and any(r == row for r, _ in tabulated))


def _is_group(config: dict) -> bool:
    """A member group's config (`ablate train --members K`, a sweep's SWEEP/groups/NNNN-ROW): K > 1 and no member index.
    Its folder holds the group's checkpoint and log, not a run of its own: each member's folder is one."""
    return (config.get("members.size") or 1) > 1 and config.get("members.index") is None


def _config(folder: Path) -> dict:
    """The run's config.yaml, flattened; {} where it does not read (the folder then names the run)."""
    try:
        config = read_yaml(folder / "config.yaml", "run config")
    except ValueError:
        return {}
    return flatten(config) if isinstance(config, dict) else {}


def _why(folder: Path, trial: Trial | None) -> str:
    state, reason = (trial or (None, None))[:2]
    if state in UNFINISHED and (folder / "summary.json").exists():  # in_study left it out
        if state == "RUNNING" and not reason:  # its worker may be recording it this moment (a group's members end so)
            return (
                "its summary.json is from an attempt study.db marks running: still being recorded, or stopped before the "
                "sweep recorded it (then the sweep trains it again); not a finished seed until study.db says so"
            )
        said = f"{'running' if state != 'FAIL' else 'failed'}{f' ({reason[:200]})' if reason else ', stopped'}"
        return f"its summary.json is from an attempt study.db marks {said}: not a finished seed; the sweep trains it again"
    if reason is None or state in (None, "COMPLETE"):
        reason = _last_error(folder) or reason
    if state == "COMPLETE":
        return "no summary.json, though study.db marks its trial COMPLETE: its summary was lost; restore it or train the run again"
    if state == "RUNNING":
        # the table reads no heartbeats: after a SIGKILL the study still says running, and a user would wait for ever
        return "still running, or its worker was killed (no summary.json yet): `ablate status` says which; `ablate sweep` continues a stopped one"
    if state == "PRUNED":
        return "pruned before it wrote a summary.json"
    if state == "FAIL" and not reason:
        return "stopped (interrupted, or its worker died) before a summary.json; the sweep trains it again"
    if reason:
        return _state("FAIL", reason)
    return "no summary.json: failed, stopped or still running (nothing in the folder says which)"


def _state(state: str, reason: str) -> str:
    if state == "PRUNED":
        return "pruned"
    return f"{'diverged' if DIVERGED.search(reason) else 'failed'}: {reason[:300]}"


def _last_error(folder: Path) -> str | None:
    """Why the run stopped: its FAILED.txt (a run or member that diverged), else the last error line of a sweep
    trial's train.log (what the sweep records as its fail reason)."""
    with contextlib.suppress(OSError):
        if said := (folder / FAILED_FILE).read_text(errors="replace").strip():
            return said
    try:
        lines = (folder / "train.log").read_text(errors="replace").splitlines()
    except OSError:
        return None
    diverged = [line.strip() for line in lines if DIVERGED.search(line)]
    errors = [line.strip() for line in lines if _ERROR.match(line)]
    return (diverged or errors or [None])[-1]


def _trials(db: Path) -> Trials:
    """Run folder name -> (state, fail reason, row, seed) of each trial in a sweep's SQLite study database (read-only; the
    row from the categorical parameter a variants sweep records it as, ablate.sweep.row_param), a queued trial (no run
    folder yet) under "row ROW seed SEED" with the row and seed it was queued with, and a note when the database cannot
    be read."""
    if not check_present(db):
        return {}, None
    try:
        rows = read(
            db,
            "SELECT t.state, o.value_json, f.value_json, "
            "(SELECT p.param_value || ' ' || p.distribution_json FROM trial_params p WHERE p.trial_id = t.trial_id "
            "AND (p.param_name = 'row' OR p.param_name LIKE 'row!_%' ESCAPE '!')), r.value_json, s.value_json FROM trials t "
            "LEFT JOIN trial_user_attributes o ON o.trial_id = t.trial_id AND o.key = 'out_dir' "
            "LEFT JOIN trial_user_attributes f ON f.trial_id = t.trial_id AND f.key = 'fail_reason' "
            "LEFT JOIN trial_user_attributes r ON r.trial_id = t.trial_id AND r.key = 'row' "
            "LEFT JOIN trial_user_attributes s ON s.trial_id = t.trial_id AND s.key = 'seed' ORDER BY t.number",
        )
    except ValueError as e:
        return {}, f"not read ({e}): trials whose run folder is gone, if any, are not named"
    out = {}
    for state, out_dir, reason, row, queued_row, queued_seed in rows:
        with contextlib.suppress(ValueError, TypeError):
            if state == "WAITING" and out_dir is None and queued_row is not None:
                queued = str(json.loads(queued_row))
                seed = json.loads(queued_seed or "null")
                out[queued_name(queued, seed)] = ("WAITING", None, queued, seed)
                continue
            seed = json.loads(queued_seed or "null")  # the seed it was queued with: a variants trial's, whose folder may be gone
            out[Path(json.loads(out_dir)).name] = (str(state), None if reason is None else str(json.loads(reason)), _row(row), seed)
    return out, None


def queued_name(row: str, seed) -> str:
    """How a queued trial of `row` and `seed` (None: the base's seed) is named: it has no run folder yet."""
    return f"row {row}" + ("" if seed is None else f" seed {seed}")


def _row(param: str | None) -> str | None:
    """A trial's row from its `row` parameter, "INDEX DISTRIBUTION_JSON"; None where it has none or it does not read."""
    try:
        index, distribution = param.split(" ", 1)
        return str(json.loads(distribution)["attributes"]["choices"][int(float(index))])
    except (AttributeError, ValueError, TypeError, KeyError, IndexError):
        return None
