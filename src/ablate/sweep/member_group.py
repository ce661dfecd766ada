"""A worker's member groups: which trials train together as members of one model (a row's seeds, a search's
member-able draws, or an interrupted group's rows again, to continue from its checkpoint), and running them as one
process (ablate.sweep.member_trial), each member its trial's own run in its own trial directory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from ablate.config import to_yaml
from ablate.files.atomic import DiskFull, write_file
from ablate.messages.logs import worker_says as say
from ablate.run import resume_checkpoint, run_dir_in_use
from ablate.sweep import member_trial
from ablate.sweep import trial as trial_process
from ablate.sweep.ledger import continued_attempt, fail, row_of
from ablate.sweep.plan import TrialSpec, plan_for
from ablate.sweep.spec import Sweep
from ablate.sweep.storage import StudyHandle
from ablate.sweep.trial_config import config_changed, trial_config


def take_group(handle: StudyHandle, plan, trial: optuna.Trial, root: Path) -> tuple[tuple[Path, list[Path]] | None, list[optuna.Trial]]:
    """The partners to train `trial` with. When its last attempt was a member of a group that stopped with no reason
    of its own (preempted, its worker died) and left a group checkpoint, the rows of that group's other members, so
    the group continues from its checkpoint: ((group dir, the members' run dirs), every trial in member order).
    Otherwise (None, fresh partners); also when another worker took one of the old group's rows meanwhile."""
    size = plan.members(handle, trial)
    last = continued_attempt(plan.earlier_attempts(handle, trial), root)
    mine = row_of(handle.frozen(trial))
    group = Path(last.user_attrs["members_group"]) if last is not None and "members_group" in last.user_attrs else None
    if group is None or mine is None or not (group / "checkpoints" / "last.ckpt").is_file():
        return None, plan.take_partners(handle, trial, size - 1)
    try:
        old = [handle.by_number(n) for n in json.loads((group / member_trial.GROUP_FILE).read_text())["numbers"]]
    except (OSError, ValueError, KeyError, IndexError):
        return None, plan.take_partners(handle, trial, size - 1)
    ordered, dirs = [], []
    for member in old:
        key = row_of(member)
        t = trial if key == mine else plan.take(handle, lambda k, key=key: k == key)
        if t is None or Path(member.user_attrs.get("out_dir", "")).parent != root or run_dir_in_use(group):
            # the group does not re-form: what was taken for it (this member's row too) trains in a fresh group
            partners = [p for p in [*ordered, t] if p is not None and p is not trial]
            return None, partners + plan.take_partners(handle, trial, size - 1 - len(partners))
        ordered.append(t)
        dirs.append(Path(member.user_attrs["out_dir"]))
    return (group, dirs), ordered


def other_grouping(earlier: list[FrozenTrial], root: Path, grouped: bool, asked: int) -> str | None:
    """Why an interrupted attempt's checkpoint is not continued by this attempt, which does not continue it: it trained
    as a member and this attempt trains alone, or the reverse, or in a group that does not re-form (its rows taken
    elsewhere; a search trial's retries, which form new groups): said, not passed over, and how to continue it where the
    reason is a change of `--members` (`asked`: the members this run asks of the row)."""
    last = continued_attempt(earlier, root)
    if last is None or (not grouped and "members_group" not in last.user_attrs):
        return None
    group = last.user_attrs.get("members_group")
    if group:
        saved = Path(group) / "checkpoints" / "last.ckpt"
        if not saved.is_file():
            return None
    else:
        try:
            saved = resume_checkpoint(Path(last.user_attrs["out_dir"]))
        except ValueError:  # nothing to continue from
            return None
    was = f"as a member of the group {group}" if group else "alone"
    if grouped and group:  # a group that does not re-form: a search trial's retries form new groups; rows taken elsewhere
        return f"trial {last.number} was interrupted training {was}, which does not re-form here, so this trains from the start ({saved} is kept)"
    note = f"trial {last.number} was interrupted training {was} and this trains {'as a member' if grouped else 'alone'}, so from the start ({saved} is kept)"
    before = last.user_attrs.get("members_asked")
    if before is not None and before != asked:
        note += f"; --members changed since ({before}, now {asked}): rerun the sweep with --members {before} to continue it"
    return note


def claim_group(handle: StudyHandle, trials: list[optuna.Trial], sweep: Sweep) -> list[tuple[optuna.Trial, TrialSpec]]:
    """Each trial's spec; a trial that must not run (ablate.sweep.plan's claim) is failed and left out."""
    plan, claimed = plan_for(sweep), []
    for t in trials:
        spec = plan.claim(handle, t)
        if isinstance(spec, str):
            fail(handle.study, t, spec)
        else:
            claimed.append((t, spec))
    return claimed


def run_group(
    handle: StudyHandle,
    claimed: list[tuple[optuna.Trial, TrialSpec]],
    sweep: Sweep,
    index: int,
    resume: tuple[Path, list[Path]] | None = None,
) -> list[TrialState]:
    """Claimed trials (two or more) trained as members of one model in one process (ablate.sweep.member_trial). `resume`:
    the group directory and member run directories of an interrupted group these trials continue (`take_group`)."""
    study = handle.study
    first, first_spec = claimed[0]
    group_dir = resume[0] if resume else sweep.group_dir(first.number, first_spec.row)
    # The group trains on its first member's config, so on that seed's length schedule (ablate.sweep.member_trial).
    schedule = first_spec.seed if first_spec.seed is not None else sweep.row_config(first_spec.overrides).seed
    members = {"members.size": len(claimed), "members.group": str(group_dir), "members.schedule": schedule}
    if resume and any(
        config_changed(d, trial_config(sweep, t, spec, d, {**members, "members.index": k}))
        for k, ((t, spec), d) in enumerate(zip(claimed, resume[1]))
    ):
        say(index, f"the rows of {group_dir} changed since it stopped; starting a new group")
        resume = None
        group_dir = sweep.group_dir(first.number, first_spec.row)
        members["members.group"] = str(group_dir)
    trial_dirs = []
    plan = plan_for(sweep)
    try:
        for k, (t, spec) in enumerate(claimed):
            if not resume and (note := other_grouping(plan.earlier_attempts(handle, t), sweep.trials_root, True, plan.members(handle, t))):
                say(index, f"trial {t.number} ({spec.name}): {note}")
            trial_dir = resume[1][k] if resume else sweep.trial_dir(t.number, spec.name)
            cfg = trial_config(sweep, t, spec, trial_dir, {**members, "members.index": k})
            trial_dir.mkdir(parents=True, exist_ok=True)
            write_file(trial_dir / "trial.yaml", to_yaml(cfg))
            t.set_user_attr("name", spec.name)
            t.set_user_attr("out_dir", str(trial_dir))
            t.set_user_attr("members_group", str(group_dir))
            trial_dirs.append(trial_dir)
        member_trial.start_group(group_dir, trial_dirs, [t.number for t, _ in claimed])  # a continued group: its new numbers
    except DiskFull:  # no row's fault: run_worker leaves them to continue on the next run
        raise
    except Exception as e:  # a bad sampled override: fail these trials, keep sweeping
        return [fail(study, t, f"{type(e).__name__}: {e}") for t, _ in claimed]
    names = ", ".join(f"{t.number} ({spec.name})" for t, spec in claimed)
    how = "continue as" if resume else "started as"
    say(index, f"trials {names} {how} {len(claimed)} members of one model in {group_dir}")
    began = time.time()
    trials = [t for t, _ in claimed]
    rc = trial_process.launch_group(handle, trials, group_dir, resume is not None, sweep.pruner, sweep.objective.metric)
    states = member_trial.record_group(study, trials, sweep.objective.terms, trial_dirs, group_dir, rc)
    for t, spec, state in zip(trials, (s for _, s in claimed), states):
        reason = handle.frozen(t).user_attrs.get("fail_reason", "") if state == TrialState.FAIL else ""
        say(index, f"trial {t.number} ({spec.name}) {state.name} after {time.time() - began:.0f} s {reason}".rstrip())
    return states
