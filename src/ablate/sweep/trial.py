"""One sweep trial in its own process, both sides of the protocol between a worker and its trial.

Parent (the worker): `launch` starts `python -m ablate.sweep.trial TRIAL.yaml`, beats the trial's heartbeat
while it trains, and `record_result` turns its exit code and summary.json into the trial's state. Child:
`main` trains the run, reporting the objective's main metric at every validation so the study's pruner can
stop a bad trial early. The pruner's spec and the metric are handed over by environment; the child never
reads the sweep file. Exit codes: 0 finished, PRUNED_EXIT pruned, PREEMPTED_EXIT stopped by a signal after
saving (its row runs again), anything else failed. A separate process isolates crashes, OOMs and CUDA state.
A trial whose worker dies, even by SIGKILL, stops as on SIGTERM: it saves and exits (ablate.sweep.parent_watch).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ablate import plugins
from ablate.files.json_file import object_or_empty
from ablate.messages import logs
from ablate.messages.redact import redact, redact_tracebacks
from ablate.run import INTERRUPTED_EXIT, PREEMPTED_EXIT
from ablate.run.exits import STOP_SIGNALS, SWEEP_FILE_ENV, stop_exit
from ablate.run.summary_fields import check_summary
from ablate.sweep.ledger import KILLED, fail, tell
from ablate.sweep.parent_watch import watch_parent, watched_env
from ablate.sweep.storage import HEARTBEAT_S, STORAGE_ENV, StudyHandle, make_storage

PRUNED_EXIT = 3
_STUDY_ENV, _PRUNER_ENV, _METRIC_ENV = "ABLATE_STUDY_NAME", "ABLATE_TRIAL_PRUNER", "ABLATE_TRIAL_METRIC"
TRIAL_ENV = "ABLATE_TRIAL_NUMBER"  # the trial numbers (comma-separated for a member group) this process trains


class StudyLost(Exception):
    """The study could not be read or beaten while a trial ran; the trial was stopped after saving."""


class Stop:
    """SIGTERM/SIGUSR1 to a worker (a preempted job) or SIGINT (Ctrl-C): pass it on to the running trial as SIGTERM,
    which saves a checkpoint and exits (PREEMPTED_EXIT, or INTERRUPTED_EXIT when the trial saw the Ctrl-C itself);
    the trial is then failed without a reason, so its row continues on the next run, and the worker stops."""

    SIGNALS = STOP_SIGNALS

    requested = False
    signum: int | None = None  # the first signal; a Ctrl-C wins, as in a training run
    child: subprocess.Popen | None = None

    @classmethod
    def note(cls, signum: int) -> None:
        cls.requested = True
        if cls.signum is None or signum == signal.SIGINT:
            cls.signum = signum

    @classmethod
    def exit_code(cls) -> int:
        return stop_exit(cls.signum)

    @classmethod
    def handler(cls, signum, frame) -> None:
        cls.note(signum)
        if cls.child is not None and cls.child.poll() is None:
            cls.child.send_signal(signal.SIGTERM)


# -- parent side -------------------------------------------------------------------------------------------------


def launch(handle: StudyHandle, trial: optuna.Trial, trial_dir: Path, resume: bool, pruner: dict, metric: str) -> int:
    """Run the trial's process (this module's `__main__`) to its end, beating its heartbeat; returns its exit code."""
    target = [f"{__package__}.trial", str(trial_dir / "trial.yaml")]
    return _supervise(handle, [trial], target, trial_dir, resume, pruner, metric)


def launch_group(handle: StudyHandle, trials: list[optuna.Trial], group_dir: Path, resume: bool, pruner: dict, metric: str) -> int:
    """Run a member group's process (ablate.sweep.member_trial), which trains `trials` as one model, to its end,
    beating every member's heartbeat; returns its exit code."""
    return _supervise(handle, trials, [f"{__package__}.member_trial", str(group_dir)], group_dir, resume, pruner, metric)


def _supervise(
    handle: StudyHandle, trials: list[optuna.Trial], target: list[str], log_dir: Path, resume: bool, pruner: dict, metric: str
) -> int:
    """`python -m TARGET [--resume]`, its output appended to LOG_DIR/train.log, watched to its end: the trials' heartbeats
    beaten while it runs, stopped (SIGTERM) when a trial is no longer RUNNING in the study or this worker is interrupted."""
    trial = trials[0]
    env = {
        **os.environ,
        STORAGE_ENV: handle.url,
        _STUDY_ENV: handle.study.study_name,
        TRIAL_ENV: ",".join(str(t.number) for t in trials),
        _PRUNER_ENV: json.dumps(pruner),
        _METRIC_ENV: metric,
        **({SWEEP_FILE_ENV: str(handle.sweep_file)} if handle.sweep_file else {}),
    }
    cmd = [sys.executable, "-m", *target, *(["--resume"] if resume else [])]
    with open(log_dir / "train.log", "ab") as log:
        # The trial watches this worker: if it dies (even by SIGKILL), the trial saves and exits (ablate.sweep.parent_watch).
        child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=watched_env(env))
        Stop.child = child
        if Stop.requested:  # the signal came between the worker's last look and this start: the trial stops at once
            child.send_signal(signal.SIGTERM)
        try:
            while True:
                try:
                    return child.wait(timeout=HEARTBEAT_S)
                except subprocess.TimeoutExpired:
                    if any(handle.frozen(t).state != TrialState.RUNNING for t in trials):
                        # Failed as stale (this machine was suspended, the DB unreachable) and retried elsewhere.
                        raise optuna.exceptions.UpdateFinishedTrialError(f"trial {trial.number} is no longer running") from None
                    for t in trials:
                        handle.beat(t)
        except optuna.exceptions.UpdateFinishedTrialError:
            raise
        except Exception as e:
            # The study failed its watcher (a database locked past its timeout, a server or a heartbeat file out of
            # reach): the trial saves and stops, and its row continues, as a preempted one does, on a retry or a rerun.
            raise StudyLost(f"trial {trial.number} stopped: its study could not be read or beaten ({type(e).__name__}: {e})") from e
        finally:
            if child.poll() is None:  # stopped here (above, or a Ctrl-C): the trial saves its checkpoint and exits
                child.send_signal(signal.SIGTERM)
                child.wait()


def metric_value(summary: dict, name: str) -> float:
    """The run's value of `name`: its best checkpoint's when that was selected by `name`, else the reported (last, or
    with train.final_average the averaged model's) value."""
    averaged = str(summary.get("selected", "")).startswith("avg")
    if not averaged and summary.get("best", {}).get("metric") == name and summary["best"].get("value") is not None:
        return float(summary["best"]["value"])
    if name in summary.get("last", {}):
        return float(summary["last"][name])
    if name in summary:
        return float(summary[name])
    raise KeyError(
        f"metric '{name}' is not in the run summary (known: {sorted(summary.get('last', {})) + [k for k in summary if '/' in k]})"
    )


def objective_value(terms: dict[str, float], summary: dict) -> float:
    """The weighted sum of the objective's metrics, read from a run's summary."""
    return sum(w * metric_value(summary, m) for m, w in terms.items())


def record_result(study: optuna.Study, trial: optuna.Trial, terms: dict[str, float], trial_dir: Path, rc: int) -> TrialState:
    summary = object_or_empty(trial_dir / "summary.json")
    if summary:
        try:
            check_summary(summary, str(trial_dir / "summary.json"))
        except ValueError as e:  # damaged since the run wrote it: no objective to read, and the row runs again
            return fail(study, trial, redact(str(e)))
        for key in ("wall_seconds", "speed/tokens_per_s", "speed/step_ms", "speed/peak_mem_mb"):
            if key in summary:
                trial.set_user_attr(key, summary[key])
        params = summary.get("params")
        trial.set_user_attr("params", params.get("total") if isinstance(params, dict) else params)
        for key, value in summary.get("last", {}).items():
            trial.set_user_attr(key, value)
    elif rc == 0:
        return fail(study, trial, f"exit code 0, but {trial_dir / 'summary.json'} is missing or not a JSON object")
    if rc == 0:
        try:
            value = objective_value(terms, summary)
        except KeyError as e:
            return fail(study, trial, e.args[0])
        if not math.isfinite(value):
            return fail(study, trial, f"the objective is {value}")
        tell(study, trial, value)
        return TrialState.COMPLETE
    if rc == PRUNED_EXIT:
        tell(study, trial, state=TrialState.PRUNED)
        return TrialState.PRUNED
    if rc in (PREEMPTED_EXIT, INTERRUPTED_EXIT) or (rc in (-signal.SIGTERM, -signal.SIGINT) and Stop.requested):
        # Stopped by a signal after saving (or by the worker's SIGTERM before training began, with nothing to save; or
        # by a second Ctrl-C, which ends a trial at once, after the first had it save): failed without a reason, so its
        # row continues from its last checkpoint on the next run.
        trial.set_user_attr("interrupted" if rc in (INTERRUPTED_EXIT, -signal.SIGINT) else "preempted", True)
        return fail(study, trial)
    if rc < 0:  # killed from outside (the OOM killer, a scheduler's kill -9): its checkpoints are whole, so a rerun continues it
        trial.set_user_attr(KILLED, True)
    return fail(study, trial, redact(exit_reason(rc, trial_dir)))


def exit_reason(rc: int, trial_dir: Path) -> str:
    """Why a trial's process ended with `rc`, for its fail reason. Killed by a signal, the log's last line is whatever
    it was doing, not why: the signal is named (SIGKILL is what the kernel's out-of-memory killer sends), with the
    log's last error line only where it has one."""
    if rc >= 0:
        return f"exit code {rc}: {fail_reason(trial_dir)}"
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        name = f"signal {-rc}"
    why = f"killed by {name} (exit code {rc}" + ("; out of memory? the kernel's OOM killer sends it)" if rc == -signal.SIGKILL else ")")
    error = fail_reason(trial_dir, errors_only=True)
    return f"{why}; its log's last error: {error}" if error else why


def fail_reason(trial_dir: Path, errors_only: bool = False) -> str:
    """The log's last error line; one that ends with a colon (torch's "Error(s) in loading state_dict for X:") with
    the line that says what the error was."""
    log = (trial_dir / "train.log").read_text(errors="replace").strip().splitlines() if (trial_dir / "train.log").exists() else []
    errors = [i for i, line in enumerate(log) if re.match(r"^[\w.]*(Error|Exception|Interrupt)\b|^ablate\b.*error", line)]
    if not errors:
        return "" if errors_only else (log[-1] if log else "the trial process died without output")[:500]
    line = log[errors[-1]]
    after = log[errors[-1] + 1] if errors[-1] + 1 < len(log) else ""
    if line.endswith(":") or after.startswith("  at "):  # a plugin's error: where in its file ("  at FILE, line N")
        line = f"{line} {after.strip()}"
    return line[:500]


# -- child side --------------------------------------------------------------------------------------------------


def running_trials() -> list[optuna.Trial]:
    """The trials this process trains (one, or a member group's), reattached to the study its worker named."""
    from ablate.sweep.components import make_pruner

    storage = make_storage(os.environ[STORAGE_ENV])
    study = optuna.load_study(study_name=os.environ[_STUDY_ENV], storage=storage, pruner=make_pruner(json.loads(os.environ[_PRUNER_ENV])))
    handle = StudyHandle(study, storage, os.environ[STORAGE_ENV])
    # Optuna has no public way to reattach to a running trial from another process; Trial(study, id) is what
    # its own integrations do.
    return [optuna.trial.Trial(study, handle.trial_id(int(n))) for n in os.environ[TRIAL_ENV].split(",")]


def pruned_metric() -> str:
    return os.environ[_METRIC_ENV]


def _pruning_callback():
    from ablate.sweep.pruning import PruningCallback

    return PruningCallback(running_trials()[0], pruned_metric())


def main(argv: list[str]) -> int:
    from ablate.experiment import load_config
    from ablate.run.train import train

    logs.to_stderr()
    watch_parent(f"trial {os.environ.get(TRIAL_ENV, '')}".rstrip())
    cfg = load_config([argv[0]])
    callbacks = [_pruning_callback()] if os.environ.get(TRIAL_ENV) else []
    try:
        train(cfg, callbacks, resume="--resume" in argv[1:])
    except Exception as e:
        if said_as_a_plugins(e):
            return 1
        raise
    return PRUNED_EXIT if any(c.pruned for c in callbacks) else 0


def said_as_a_plugins(e: BaseException) -> bool:
    """An error raised in a plugin's code said where it was, as `ablate train` says it (`fail_reason` keeps both
    lines), for a trial and a member group alike; False for any other, left to its traceback."""
    if said := plugins.error_said(e, one_line=True):
        print(f"ablate trial: error: {said}", file=sys.stderr)
        return True
    return False


if __name__ == "__main__":
    redact_tracebacks(os.environ.get(STORAGE_ENV, ""))  # a crash's traceback goes to train.log: the study's URL masked
    sys.exit(main(sys.argv[1:]))
