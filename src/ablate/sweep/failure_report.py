"""The failure report of a sweep: each row left failed by its own fault (a crash, a NaN, a bad override), why and where
its log is, on stderr; an error (exit 1) when no row finished, else a warning. And each run left interrupted at the end
(its workers died more often than a run retries), which the next run continues: never dropped without a word; and the
command that continues it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from ablate.files.atomic import DiskFull
from ablate.run import PREEMPTED_EXIT
from ablate.sweep.ledger import attempts, failed_by_itself, is_bookkeeping, left_interrupted, row_of, was_killed
from ablate.sweep.plan_base import MAX_RETRY
from ablate.sweep.storage import FREE_SPACE, STORAGE_LOST, driver_reason, lost_storage

_RAN = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def failed_rows(study: optuna.Study) -> tuple[list[FrozenTrial], bool]:
    """The last trial of each row left failed by its own fault (a crash, a NaN, a bad override), and whether no row
    finished at all. A row that failed and then finished on a rerun, or whose trial was stopped by a signal or died with
    its worker (it continues on the next run), is not failed; bookkeeping claims are no row. A search trial, with its
    retries, is its own row."""
    last: dict = {}
    finished = set()
    for t in study.get_trials(deepcopy=False):
        if t.state in (TrialState.WAITING, TrialState.RUNNING) or is_bookkeeping(t):
            continue
        key = row_of(t) or attempts(t)[0]  # a search trial's retries are its run, continued
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            finished.add(key)
        if key not in last or t.number > last[key].number:
            last[key] = t
    failed = [t for key, t in last.items() if key not in finished and failed_by_itself(t)]
    return failed, bool(failed) and not finished


def where_logged(t: FrozenTrial) -> str:
    """Where a trial's output is: its process writes stdout and stderr to RUN_DIR/train.log (ablate.sweep.trial); a
    member's is its group's process, which writes GROUP_DIR/train.log (ablate.sweep.member_group)."""
    if "members_group" in t.user_attrs:
        return f"log: {Path(t.user_attrs['members_group']) / 'train.log'} (its member group's)"
    if "out_dir" not in t.user_attrs:
        return "no log: it failed before its run directory was made"
    return f"log: {Path(t.user_attrs['out_dir']) / 'train.log'}"


def report_failures(study: optuna.Study) -> bool:
    """Name each failed row, why and where its log is, on stderr (whole lines, for logs and CI): an error when no row
    finished, else a warning. Returns whether no row finished (the sweep then exits 1)."""
    failed, none_finished = failed_rows(study)
    if not failed:
        return False
    # counted as runs, a row's seed each (a search trial is one), not as rows: a row of 2 seeds that failed is 2 of them
    runs = len({row_of(t) or attempts(t)[0] for t in study.get_trials(deepcopy=False, states=_RAN) if not is_bookkeeping(t)})
    if not none_finished:
        head = f"warning: {len(failed)} of {runs} runs failed (the others have results)"
    elif len(failed) == runs:
        head = f"error: every trial failed ({runs} run{'s' * (runs > 1)}; nothing to compare)"
    else:  # the rest were stopped or died with their workers, and continue on the next run
        head = f"error: no run finished: {len(failed)} of {runs} runs failed, the others were stopped"
    lines = [f"ablate sweep: {head}:"]
    for t in failed:
        name = t.user_attrs.get("name") or (row_of(t) or (f"trial{t.number}",))[0]
        again = "; the next run continues it from its last checkpoint, if it saved one" if was_killed(t) else ""
        lines.append(f"  {name}: trial {t.number}, {t.user_attrs.get('fail_reason', '')[:300]}{again}; {where_logged(t)}")
    print("\n".join(lines), file=sys.stderr, flush=True)
    return none_finished


def report_interrupted(study: optuna.Study, rows: set | None = None) -> bool:
    """Name each run a sweep that ended by itself (no signal) left interrupted, on stderr; returns whether there was one
    (the sweep then exits 75, as a preempted one: run it again to continue them). `rows`: a variants sweep's (row,
    seed) pairs; one no longer in the file is not continued, so not named."""
    left = [t for t in left_interrupted(study.get_trials(deepcopy=False)) if rows is None or row_of(t) in rows]
    if not left:
        return False
    lines = [
        f"ablate sweep: warning: {len(left)} run{'s were' if len(left) > 1 else ' was'} left interrupted (its worker "
        f"stopped or killed, a machine lost; a run is retried at most {MAX_RETRY} times in one run of the sweep); run the "
        f"sweep again to continue {'them' if len(left) > 1 else 'it'} from {'their' if len(left) > 1 else 'its'} checkpoint:"
    ]
    for t in left:
        name = t.user_attrs.get("name") or (row_of(t) or (f"trial{t.number}",))[0]
        lines.append(f"  {name}: trial {t.number}; {where_logged(t)}")
    print("\n".join(lines), file=sys.stderr, flush=True)
    return True


def report_orphans(study: optuna.Study, codes: list[int]) -> bool:
    """A worker killed by a signal leaves its trial RUNNING (the trial saved as its worker died: ablate.sweep.parent_watch),
    to be failed as stale by a later worker: said when a sweep ends so, on stderr; returns whether it did (exit 75)."""
    killed = [f"{i} ({code})" for i, code in enumerate(codes) if code < 0]
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if not killed or not running:
        return False
    names = ", ".join(f"{t.user_attrs.get('name', 'trial')} (trial {t.number})" for t in running[:6]) + (" ..." if len(running) > 6 else "")
    print(
        f"ablate sweep: warning: worker {', '.join(killed)} killed by a signal, and {len(running)} trial"
        f"{'s are' if len(running) > 1 else ' is'} still running in the study: {names}. Unless another machine runs "
        f"{'them' if len(running) > 1 else 'it'}, run the sweep again to continue from {'their' if len(running) > 1 else 'its'} checkpoint",
        file=sys.stderr,
        flush=True,
    )
    return True


def rerun(args: argparse.Namespace, workers: int) -> str:
    """The command that continues a sweep (said when it stops with 75): its file and the flags that placed its workers."""
    flags = [
        *(["--workers", str(workers)] if args.workers else []),
        *(["--trials-per-gpu", args.trials_per_gpu] if args.trials_per_gpu else []),
    ]
    return shlex.join(["ablate", "sweep", str(args.file), *flags])


def cannot_go_on(e: BaseException, again: str) -> int | None:
    """PREEMPTED_EXIT, said with what to do, where `e` is no trial's fault and a rerun (`again`) continues the trials
    (each write whole or not made, running trials saved): a full disk, the study's server out of reach. None otherwise."""
    if isinstance(e, DiskFull):
        print(f"ablate sweep: error: {e}; {FREE_SPACE}: {again}", file=sys.stderr)
        return PREEMPTED_EXIT
    if (lost := lost_storage(e)) is not None:
        print(f"ablate sweep: error: {STORAGE_LOST} ({driver_reason(lost)}): {again}", file=sys.stderr)
        return PREEMPTED_EXIT
    return None
