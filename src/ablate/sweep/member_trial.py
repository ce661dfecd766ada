"""A member group of sweep trials in one process: both sides of the protocol between a worker and the group.

Worker side: `start_group` writes GROUP_DIR/group.json (each member's trial.yaml, in member order) and
`record_group` turns the group's exit code and each member's run directory into that member's trial state: its
summary.json (complete, or pruned when its pruner stopped it), FAILED.txt (failed with the reason, a diverged member),
or, after a signal, every trial failed without a reason so its row runs again (killed from outside: failed as killed,
which the next run continues too). Child side (`main`, run by
ablate.sweep.trial.launch): trains the group (ablate.run.members), each member reporting to its own trial.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ablate.files.atomic import write_file
from ablate.files.json_file import object_or_empty
from ablate.messages import logs
from ablate.messages.redact import redact
from ablate.run import FAILED_FILE, INTERRUPTED_EXIT, PREEMPTED_EXIT
from ablate.run.exits import PRUNED
from ablate.sweep.ledger import fail
from ablate.sweep.trial import PRUNED_EXIT, exit_reason, record_result

GROUP_FILE = "group.json"


def start_group(group_dir: Path, trial_dirs: list[Path], numbers: list[int]) -> None:
    group_dir.mkdir(parents=True, exist_ok=True)
    write_file(group_dir / GROUP_FILE, json.dumps({"trials": [str(d / "trial.yaml") for d in trial_dirs], "numbers": numbers}, indent=1))


def record_group(
    study: optuna.Study, trials: list, terms: dict[str, float], trial_dirs: list[Path], group_dir: Path, rc: int
) -> list[TrialState]:
    """Each member's trial state from its own run directory (see the module's docstring). A group killed (SIGKILL, the
    OOM killer) during its members' ends fails every member as killed, those whose end was written too: one recorded
    complete kept the group from re-forming, and the others, trained to the end in the group's checkpoint, trained
    again from the start, alone. The group's next run continues all of them, writing each end again."""
    states = []
    ended = all((d / "summary.json").exists() or (d / FAILED_FILE).exists() for d in trial_dirs)  # a diverged member's end
    for trial, trial_dir in zip(trials, trial_dirs):
        summary = trial_dir / "summary.json"
        if rc in (PREEMPTED_EXIT, INTERRUPTED_EXIT) or (rc < 0 and not ended):
            states.append(record_result(study, trial, terms, trial_dir, rc))
        elif summary.exists():
            pruned = object_or_empty(summary).get("stop_reason") == PRUNED
            states.append(record_result(study, trial, terms, trial_dir, PRUNED_EXIT if pruned else 0))
        elif (trial_dir / FAILED_FILE).exists():
            states.append(fail(study, trial, redact((trial_dir / FAILED_FILE).read_text().strip())))
        else:
            states.append(fail(study, trial, redact(exit_reason(rc, group_dir))))
    return states


def main(argv: list[str]) -> int:
    import dataclasses

    from ablate.config.members import member_values
    from ablate.experiment import load_config
    from ablate.run.members import train_members
    from ablate.sweep.parent_watch import watch_parent
    from ablate.sweep.trial import TRIAL_ENV, pruned_metric, running_trials, said_as_a_plugins

    logs.to_stderr()
    group_dir = Path(argv[0])
    spec = json.loads((group_dir / GROUP_FILE).read_text())
    watch_parent(f"trials {','.join(map(str, spec['numbers']))}")
    configs = [load_config([path]) for path in spec["trials"]]
    member_values(configs)  # the worker grouped them; a group that cannot train together is refused, naming the key
    group = dataclasses.replace(configs[0], out_dir=str(group_dir), members=dataclasses.replace(configs[0].members, index=None))
    callbacks = []
    if os.environ.get(TRIAL_ENV):  # each member reports to its own trial, as a trial alone does (NopPruner: never prunes)
        from ablate.sweep.pruning import MemberPruning

        trials, metric = running_trials(), pruned_metric()
        callbacks.append(lambda runs: MemberPruning(trials, metric, runs))
    try:
        train_members(group, configs, resume="--resume" in argv[1:], member_callbacks=callbacks)
    except Exception as e:
        if said_as_a_plugins(e):
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
