"""A sweep worker: take trials from the study until its plan says stop, each trained in its own process.

Racing workers (or machines) share one study; a trial whose worker died is failed by its stale heartbeat and
its row runs again, continuing from the dead trial's last checkpoint (ablate.sweep.plan decides which trials
run, ablate.sweep.trial runs one). A worker whose `ablate sweep` process dies, even by SIGKILL, stops as on SIGTERM:
its trial saves, the worker records it and takes no new row (ablate.sweep.parent_watch).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from ablate.config import to_yaml
from ablate.files.atomic import DiskFull, write_file
from ablate.messages.logs import worker_says as say
from ablate.messages.redact import redact, redact_tracebacks
from ablate.run import PREEMPTED_EXIT, resume_checkpoint, run_dir_in_use
from ablate.sweep import trial as trial_process
from ablate.sweep.components import make_pruner
from ablate.sweep.ledger import continued_attempt, fail
from ablate.sweep.member_group import claim_group, other_grouping, run_group, take_group
from ablate.sweep.plan import TrialSpec, plan_for
from ablate.sweep.spec import Sweep
from ablate.sweep.storage import FREE_SPACE, HEARTBEAT_S, StudyHandle, claim_lock, open_study
from ablate.sweep.trial_config import config_changed, trial_config


def open_sweep_study(sweep: Sweep, url: str) -> StudyHandle:
    plan = plan_for(sweep)
    handle = open_study(sweep.name, url, sweep.objective.direction, plan.sampler(), make_pruner(sweep.pruner), sqlite_dir=sweep.out_dir)
    handle.sweep_file = sweep.path
    return handle


def run_worker(sweep: Sweep, url: str, index: int = 0, gpu: str | None = None, since: int = 0) -> None:
    """Take trials until the budget is spent and no running trial could still need a retry. `gpu`: the worker's
    CUDA_VISIBLE_DEVICES, recorded on each trial it runs (the live view's and `ablate status`'s gpu column); `since`:
    the number of this run's first trial (work interrupted MAX_RETRY times since is not queued again)."""
    handle = open_sweep_study(sweep, url)
    study, plan = handle.study, plan_for(sweep)
    started = time.time()
    for signum in trial_process.Stop.SIGNALS:
        signal.signal(signum, trial_process.Stop.handler)
    while True:
        if trial_process.Stop.requested:
            say(index, "stopped by a signal; re-run the sweep to continue")
            return
        optuna.storages.fail_stale_trials(study)  # trials of dead workers -> FAIL, and queued again just below
        plan.queue(study, only_dead=True, since=since)
        action = plan.next_action(study, started)
        if action == "stop":
            say(index, "no trials left; stopping")
            return
        if action == "wait":
            time.sleep(HEARTBEAT_S)
            continue
        taken: list[optuna.Trial] = []
        resume = None
        try:
            with claim_lock(url):
                trial = plan.take(handle) if plan.next_action(study, started) == "run" else None
                if trial is None:  # another worker took the last queued row meanwhile
                    continue
                taken.append(trial)
                size = plan.members(handle, trial)  # >1: trained with others as members of one model
                if size > 1:
                    resume, partners = take_group(handle, plan, trial, sweep.trials_root)
                    taken = partners if resume else [trial, *partners]
                for t in taken:
                    handle.beat(t)  # from now on a dead worker's trial goes stale
                    t.set_user_attr("worker", index)
                    t.set_user_attr("members_asked", size)  # what a later run compares its own --members with
                    if gpu:
                        t.set_user_attr("gpu", gpu)
        except BaseException:
            for t in taken:  # interrupted between claiming and the first heartbeat: never leave it RUNNING
                fail(study, t)
            raise
        if trial_process.Stop.requested:  # the signal came while claiming: start nothing; it continues on the next run
            for t in taken:  # interrupted, not bookkeeping: a search's draw (a grid point) is retried, not passed over
                t.set_user_attr("preempted", True)
                fail(study, t)
            continue
        try:
            if len(taken) > 1:
                claimed = claim_group(handle, taken, sweep)
                if len(claimed) > 1:  # an old group continues only whole
                    run_group(handle, claimed, sweep, index, resume if len(claimed) == len(taken) else None)
                for t, spec in claimed if len(claimed) == 1 else ():
                    run_trial(handle, t, sweep, index, spec)
            else:
                run_trial(handle, trial, sweep, index)
        except optuna.exceptions.UpdateFinishedTrialError:
            # Our heartbeat went stale (e.g. the machine was suspended) and the trial was failed and
            # retried elsewhere; its result is not recorded twice.
            say(index, f"trial {trial.number} was already failed by its stale heartbeat; result dropped")
            for t in taken:  # a group's other members stopped with it (their group saved): they continue on a rerun
                with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
                    if handle.frozen(t).state == TrialState.RUNNING:
                        fail(study, t)
        except trial_process.StudyLost as e:  # the trial saved and stopped: its row continues, as a preempted one
            say(index, redact(str(e))[:400])
            _leave_interrupted(study, taken)
        except DiskFull:  # no trial's fault, and the next write fails too: they continue on the next run (`ablate sweep` says so)
            _leave_interrupted(study, taken)
            raise
        except Exception as e:  # anything else fails these trials, not the worker
            say(index, f"trial {trial.number} failed in the worker: {type(e).__name__}: {redact(str(e))[:300]}")
            for t in taken:
                with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):  # failed meanwhile as stale, or told
                    fail(study, t, f"{type(e).__name__}: {redact(str(e))}")


def _leave_interrupted(study: optuna.Study, taken: list[optuna.Trial]) -> None:
    """Fail `taken` without a reason of their own, so their rows continue on the next run; the study may be out of
    reach, and then they go stale."""
    for t in taken:
        with contextlib.suppress(Exception):
            fail(study, t)


def run_trial(handle: StudyHandle, trial: optuna.Trial, sweep: Sweep, index: int, spec: TrialSpec | str | None = None) -> TrialState:
    study = handle.study
    plan = plan_for(sweep)
    spec = plan.claim(handle, trial) if spec is None else spec
    if isinstance(spec, str):
        return fail(study, trial, spec)
    fresh = sweep.trial_dir(trial.number, spec.name)
    earlier = plan.earlier_attempts(handle, trial)
    previous = continuable(earlier, sweep.trials_root)
    if previous is None and (note := other_grouping(earlier, sweep.trials_root, False, plan.members(handle, trial))):
        say(index, f"trial {trial.number} ({spec.name}): {note}")
    trial.set_user_attr("name", spec.name)
    try:
        trial_dir = Path(previous.user_attrs["out_dir"]) if previous is not None else fresh
        cfg = trial_config(sweep, trial, spec, trial_dir)
        if previous is not None and config_changed(trial_dir, cfg):
            say(index, f"trial {trial.number} ({spec.name}): the row's config changed since trial {previous.number}; starting over")
            previous, trial_dir = None, fresh
            cfg = trial_config(sweep, trial, spec, trial_dir)
        trial_dir.mkdir(parents=True, exist_ok=True)
        write_file(trial_dir / "trial.yaml", to_yaml(cfg))
    except DiskFull:  # no row's fault: run_worker leaves it to continue on the next run
        raise
    except Exception as e:  # a bad sampled override: fail this trial, keep sweeping
        return fail(study, trial, f"{type(e).__name__}: {e}")
    trial.set_user_attr("out_dir", str(trial_dir))
    if previous is not None:
        trial.set_user_attr("continues", previous.number)
    say(
        index,
        f"trial {trial.number} ({spec.name}) "
        + (
            f"continues trial {previous.number} from its last checkpoint in {trial_dir}"
            if previous is not None
            else f"started in {trial_dir}"
        ),
    )
    began = time.time()
    rc = trial_process.launch(handle, trial, trial_dir, resume=previous is not None, pruner=sweep.pruner, metric=sweep.objective.metric)
    state = trial_process.record_result(study, trial, sweep.objective.terms, trial_dir, rc)
    attrs = handle.frozen(trial).user_attrs if state == TrialState.FAIL else {}
    ended, reason = state.name, attrs.get("fail_reason", "")
    if state == TrialState.FAIL and "fail_reason" not in attrs:  # stopped by a signal after saving: no failure of its own
        ended, reason = "interrupted" if attrs.get("interrupted") else "preempted", "(continues on the next run)"
    say(index, f"trial {trial.number} ({spec.name}) {ended} after {time.time() - began:.0f} s {reason}".rstrip())
    return state


def continuable(earlier: list[FrozenTrial], root: Path) -> FrozenTrial | None:
    """The earlier attempt to continue rather than start over: the last one, if it stopped with no reason of its
    own (its worker died, or it was preempted) and its run directory holds a readable checkpoint and no live
    training process."""
    last = continued_attempt(earlier, root)
    # a member's checkpoints hold its weights, not a run to continue alone (ablate.sweep.member_group continues its group)
    if last is None or "members_group" in last.user_attrs:
        return None
    out_dir = Path(last.user_attrs["out_dir"])
    if not (out_dir / "checkpoints").is_dir():
        return None
    try:
        resume_checkpoint(out_dir)
    except ValueError:
        return None
    return None if run_dir_in_use(out_dir) else last


if __name__ == "__main__":
    # python -m ablate.sweep.worker SWEEP_FILE INDEX N_TRIALS [GPU] (the storage URL comes by environment, never argv;
    # GPU is the CUDA_VISIBLE_DEVICES the worker was pinned to, given only with GPUs).
    import os

    from ablate.sweep.load import load_sweep
    from ablate.sweep.parent_watch import watch_parent
    from ablate.sweep.storage import MEMBERS_ENV, RUN_FROM_ENV, STORAGE_ENV, STORAGE_LOST, driver_reason, lost_storage

    redact_tracebacks(os.environ.get(STORAGE_ENV, ""))  # the study's URL: an error nobody worded may quote it
    _, path, worker_index, n_trials, *pinned = sys.argv
    watch_parent(f"[worker {worker_index}]")  # the ablate sweep process that started it
    worker_sweep = load_sweep(path)
    worker_sweep.n_trials = int(n_trials) or worker_sweep.n_trials
    if os.environ.get(MEMBERS_ENV):
        size = os.environ[MEMBERS_ENV]
        worker_sweep.set_members(int(size.rstrip("!")), force=size.endswith("!"))
    try:
        since = int(os.environ.get(RUN_FROM_ENV, 0))
        run_worker(worker_sweep, os.environ[STORAGE_ENV], int(worker_index), pinned[0] if pinned else None, since)
    except DiskFull as worker_error:  # what it wrote is whole: its trials continue on the next run, as a preempted one's
        say(int(worker_index), f"error: {redact(str(worker_error))}; {FREE_SPACE}")
        sys.exit(PREEMPTED_EXIT)
    except (ValueError, OSError) as worker_error:  # a damaged study: worded where raised, said as `ablate` says them
        say(int(worker_index), f"error: {redact(str(worker_error))}")
        sys.exit(2)
    except Exception as worker_error:
        if (lost := lost_storage(worker_error)) is None:
            raise
        say(int(worker_index), f"error: {STORAGE_LOST} ({driver_reason(lost)})")
        sys.exit(PREEMPTED_EXIT)
