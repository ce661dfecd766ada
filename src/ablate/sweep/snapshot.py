"""A sweep's state now, read from its study and its trials' progress files (ablate.run.progress_file): each trial that
started (row, state, step/total, epochs done, tokens/s, ETA, latest validation loss/BLEU), the counts of running,
finished, pruned and failed trials, about how long the rest will take (never less than a running trial's own ETA),
and the best row so far. Drawn by ablate.sweep.picture.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from ablate.run.progress_file import format_duration, read_progress
from ablate.sweep.ledger import failed_by_itself, is_bookkeeping, retry_of, row_of, was_killed

STALE_S = 120.0  # a running trial whose progress file is older than this is flagged (its process may hang or be elsewhere)


COUNTED = ("running", "finished", "pruned", "failed", "interrupted", "waiting")


RUNNING = ("starting", "training", "validating")
# A running trial whose progress file says its training ended: a run's final evaluation, or a member that its rules or
# pruner stopped while its group trains on (ablate.run.member_progress).
ENDED = {"finished": "training done, its end to come", "stopped": "training stopped, its end to come"}


@dataclass
class TrialView:
    """One trial as shown: its study state and what its run directory's progress.json says."""

    number: int
    name: str
    state: str  # starting | training | validating | finished | pruned | failed | interrupted | continued
    step: int | None = None
    total: int | None = None
    epochs: float | None = None  # epochs completed, a partial one as its fraction (ablate.run.progress.epochs_done)
    tokens_per_s: float | None = None
    eta_s: float | None = None
    eta_upper: bool = False  # the run may stop before eta_s (a stopping rule)
    val_loss: float | None = None
    val_bleu: float | None = None
    val_step: int | None = None
    value: float | None = None  # the objective, once finished
    note: str = ""
    gpu: str | None = None  # the CUDA_VISIBLE_DEVICES its worker was pinned to; None on CPU


@dataclass
class Snapshot:
    study: str
    direction: str
    trials: list[TrialView] = field(default_factory=list)  # every trial that started, by number
    counts: dict[str, int] = field(default_factory=dict)
    best: TrialView | None = None
    taken: float = field(default_factory=time.time)
    left_s: float | None = None  # about how long the running and waiting trials will take (see `time_left`)
    left_bound: bool = False  # left_s is an upper bound: every trial left may stop sooner than its ETA
    left_capped: float | None = None  # the mean a running trial's "≤" ETA was cut to, when one was

    @property
    def running(self) -> list[TrialView]:
        return [t for t in self.trials if t.state in RUNNING]


def _num(v) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


def _copied(recorded: Path, root: Path) -> bool:
    """Whether `root` holds a copy of the study whose trial ran in `recorded`: a folder gone, or one of a study folder
    with a database of its own (the original). A study sharing `root`'s database from an out_dir elsewhere (a storage
    several sweeps name) keeps its trials where they ran."""
    if recorded.parent == root / "trials":
        return False
    return not recorded.exists() or (recorded.parent.parent / "study.db").is_file()


def view_trial(t: FrozenTrial, now: float, silent_s: float | None = None, root: Path | None = None) -> TrialView:
    """A trial's line from the study (state, name, results) and its progress file, where this machine can read it.
    `silent_s`: a running trial's seconds without a heartbeat, past the grace period (`gone_workers`); `root`: the
    study's folder as given, whose own trials/ holds the progress of a study copied or archived from elsewhere (the
    recorded out_dir is the original's: another folder's progress, or none)."""
    name = t.user_attrs.get("name") or t.user_attrs.get("row") or f"trial{t.number}"
    state = {TrialState.COMPLETE: "finished", TrialState.PRUNED: "pruned", TrialState.RUNNING: "starting"}.get(
        t.state, "failed" if failed_by_itself(t) else "interrupted"
    )
    v = TrialView(t.number, name, state, value=t.value if t.state == TrialState.COMPLETE else None, gpu=t.user_attrs.get("gpu"))
    folder = t.user_attrs.get("out_dir")
    if folder and root is not None and _copied(Path(folder), root.resolve()):
        folder = root.resolve() / "trials" / Path(folder).name
    p = read_progress(folder) if folder else None
    if p is not None and t.state == TrialState.RUNNING and t.datetime_start and p.get("updated", 0) < t.datetime_start.timestamp():
        p = None  # written by an earlier attempt of this run directory; this one has not reached training yet
    if p is not None:
        v.step, v.total, v.epochs = p.get("step"), p.get("max_steps"), _num(p.get("epochs"))
        v.tokens_per_s, v.eta_s, v.val_step = _num(p.get("tokens_per_s")), _num(p.get("eta_s")), p.get("val_step")
        v.eta_upper = bool(p.get("eta_upper"))
        v.val_loss, v.val_bleu = _num(p.get("val/loss")), _num(p.get("val/bleu"))
        if t.state == TrialState.RUNNING:
            phase = p.get("phase")
            v.state = "validating" if phase == "validating" else "training"
            if phase in ENDED:  # its final evaluation, or a member's group, is still to end: the trial then records it
                v.note = ENDED[phase]
            elif now - p.get("updated", now) > STALE_S:
                v.note = f"no progress for {format_duration(now - p['updated'])}"
    if t.state != TrialState.RUNNING:  # what the trial recorded when it ended wins over a progress file
        v.eta_s = None
        v.tokens_per_s = _num(t.user_attrs.get("speed/tokens_per_s", v.tokens_per_s))
        v.val_loss = _num(t.user_attrs.get("val/loss", v.val_loss))
        v.val_bleu = _num(t.user_attrs.get("val/bleu", v.val_bleu))
    if p is None and t.intermediate_values:  # no progress file here (another machine): the last value reported to the pruner
        step = max(t.intermediate_values)
        v.note = f"reported {t.intermediate_values[step]:.4g} at step {step}"
    if t.state == TrialState.FAIL:
        reason = t.user_attrs.get("fail_reason")
        v.note = str(reason)[:160] if reason else interruption(t)[1]
    if t.state == TrialState.RUNNING and silent_s is not None:  # still RUNNING in the study until a sweep fails it
        v.state, v.eta_s = "interrupted", None
        v.note = f"worker gone (no heartbeat for {format_duration(silent_s)}): continues from its last checkpoint when the sweep runs again"
    return v


def gone_workers(study: optuna.Study) -> dict[int, float]:
    """Trial id -> seconds since its last heartbeat, for the running trials whose worker stopped beating longer ago
    than the grace period (killed, its machine lost). Read only: only a sweep fails them (optuna.storages
    .fail_stale_trials), and a study no sweep runs would otherwise show them running for ever. A storage without
    heartbeats (in memory) or one that cannot say now: none."""
    import sqlalchemy.exc

    storage = study._storage  # Optuna wraps an RDB storage in a cache, whose _backend it is (a journal's is its file)
    silent = getattr(storage, "silent_for", None) or getattr(getattr(storage, "_backend", None), "silent_for", None)
    if silent is None:  # not one of ablate.sweep.storage's
        return {}
    try:
        return silent(study._study_id)
    except (OSError, sqlalchemy.exc.SQLAlchemyError):
        return {}


def killed_and_continued(t: FrozenTrial, later: dict[int, FrozenTrial]) -> bool:
    """Whether `t` was killed by a signal and a later attempt continued it in its run directory, whose progress and
    summary are then that attempt's: shown as an interrupted attempt continued is, not as a failure with its numbers."""
    after = later.get(t.number)
    return was_killed(t) and after is not None and after.user_attrs.get("continues") == t.number


def interruption(t: FrozenTrial, later: dict[int, FrozenTrial] | None = None) -> tuple[str, str]:
    """(state, note) of an attempt failed without a reason of its own (its worker died, it was preempted): "continued"
    by the attempt `later` (later_attempts) names, which trains on in its run directory or runs its row again; else
    "interrupted", to continue on the next run. `ablate status` and the sweep's results say the same."""
    after = (later or {}).get(t.number)
    if after is not None:
        how = f"{'continued by' if after.user_attrs.get('continues') == t.number else 'run again as'} trial {after.number}"
        return "continued", f"{t.user_attrs['fail_reason']}; {how}" if was_killed(t) and t.user_attrs.get("fail_reason") else how
    return "interrupted", f"{'preempted' if t.user_attrs.get('preempted') else 'interrupted'}, continues on the next run"


def snapshot(study: optuna.Study, now: float | None = None, root: Path | None = None) -> Snapshot:
    """The picture of a study now: its trials (bookkeeping ones, which never ran a row, left out), counts, best.

    An interrupted trial whose row has started again is "continued" and no longer counted: `interrupted` counts
    only the work still waiting to continue, a running trial whose worker is gone (no heartbeat) among it."""
    now = time.time() if now is None else now
    snap = Snapshot(study.study_name, study.direction.name.lower(), taken=now)
    snap.counts = dict.fromkeys(COUNTED, 0)
    trials = study.get_trials(deepcopy=False)
    started = [t for t in trials if t.state != TrialState.WAITING and not is_bookkeeping(t)]
    later = later_attempts(started)
    snap.counts["waiting"] = sum(t.state == TrialState.WAITING for t in trials)
    gone = gone_workers(study) if any(t.state == TrialState.RUNNING for t in started) else {}
    for t in started:
        v = view_trial(t, now, gone.get(t._trial_id), root)
        if (v.state == "interrupted" and t.number in later) or killed_and_continued(t, later):  # the run dir's is the later one's
            state, note = interruption(t, later)
            v = TrialView(t.number, v.name, state, note=note)
        snap.trials.append(v)
    for v in snap.trials:
        if v.state != "continued":
            snap.counts["running" if v.state in RUNNING else v.state] += 1
    done = [v for v in snap.trials if v.state == "finished" and v.value is not None]
    if done:
        pick = max if snap.direction == "maximize" else min
        snap.best = pick(done, key=lambda v: v.value)
    snap.left_s, snap.left_bound, snap.left_capped = time_left(snap, [s for t in started if (s := trial_seconds(t)) is not None])
    return snap


def trial_seconds(t: FrozenTrial) -> float | None:
    """How long a finished trial took: its trial's start to its end (the process's start, the data and tokenizer, the
    run's end: the summary's wall_seconds covers training and validation only, and a sweep's estimate ran short by all
    of it), or its run's wall_seconds where longer (a continued run's counts its earlier attempts too)."""
    if t.state != TrialState.COMPLETE:
        return None
    spans = [float(t.user_attrs["wall_seconds"])] if _num(t.user_attrs.get("wall_seconds")) else []
    if t.datetime_start and t.datetime_complete:
        spans.append((t.datetime_complete - t.datetime_start).total_seconds())
    return max(spans, default=None)


def later_attempts(started: list[FrozenTrial]) -> dict[int, FrozenTrial]:
    """Trial number -> the next started trial of the same work: the same row of a variants sweep, or a search trial's
    retry (the last of its `retry_history`; `failed_trial` names the first attempt)."""
    later: dict[int, FrozenTrial] = {}
    by_row: dict[tuple, list[FrozenTrial]] = {}
    for t in sorted(started, key=lambda t: t.number):
        if (key := row_of(t)) is not None:
            by_row.setdefault(key, []).append(t)
        if (retried := retry_of(t)) is not None:
            later.setdefault(retried, t)
    for attempts in by_row.values():
        for before, after in zip(attempts, attempts[1:]):
            later.setdefault(before.number, after)
    return later


def time_left(snap: Snapshot, walls: list[float]) -> tuple[float | None, bool, float | None]:
    """When the last running or waiting trial ends, at the current parallelism (as many at a time as are running, at
    least one): each running trial at its own ETA, each waiting one at the finished ones' mean time (`walls`, each a
    `trial_seconds`), started as soon as a running one ends. So the study's remaining time is never shorter than a
    running trial's ETA, except a "≤" ETA (a stopping rule may end that run sooner), counted at most the mean.

    Returns (seconds, None when unknown or nothing is left; whether it is an upper bound, every trial left ending by
    its "≤" ETA; the mean a "≤" ETA was cut to, or None)."""
    running, waiting = snap.running, snap.counts.get("waiting", 0)
    mean = sum(walls) / len(walls) if walls else None
    if not (running or waiting) or (mean is None and (waiting or any(v.eta_s is None for v in running))):
        return None, False, None
    ends, bound, capped = [], not waiting, None
    for v in running:
        if v.eta_s is not None and not (v.eta_upper and mean is not None and v.eta_s > mean):
            ends.append(v.eta_s)
            bound = bound and v.eta_upper
            continue
        if v.eta_s is not None:  # a "≤" ETA beyond the mean: the run will likely stop sooner
            capped = mean
        ends.append(mean)
        bound = False
    heap = ends or [0.0]
    heapq.heapify(heap)
    for _ in range(waiting):
        heapq.heapreplace(heap, heap[0] + mean)
    return max(heap), bound, capped
