"""Running a sweep as an Optuna study: storage, samplers, pruners, workers and the per-trial loop.

Storage is an RDB (SQLite under the sweep's out_dir by default, PostgreSQL for several machines)
or a journal file on a shared file system (ablate.journal), always with trial heartbeats, so a
trial whose worker died is failed and its row retried by the next worker or re-run, continuing
from the dead trial's last checkpoint. Variant rows are enqueued as WAITING trials; a worker
takes one atomically with `study.ask()`, and a row already finished or taken by an
earlier-started trial is skipped, so racing workers (or machines) never run a row twice. Each
trial trains in a child process (`python -m ablate.trial`), which isolates crashes, OOMs and
CUDA state from the worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ablate.journal import JournalStudyStorage, journal_path
from ablate.sweep import Sweep, row_group, safe_name

# We drive trials with ask/tell and beat the heart ourselves, which Optuna warns about; heartbeats are "experimental".
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
# A trial whose worker stopped beating for GRACE_S is failed and retried; tests shorten this by environment.
HEARTBEAT_S = float(os.environ.get("ABLATE_SWEEP_HEARTBEAT", 5))
GRACE_S = 4 * HEARTBEAT_S
MAX_RETRY = 2
PRUNED_EXIT = 3
PREEMPTED_EXIT = 75  # ablate.train.PREEMPTED_EXIT
STORAGE_ENV = "ABLATE_SWEEP_STORAGE"


def redact(url: str) -> str:
    """postgresql://user:secret@host/db -> postgresql://user:***@host/db, for anything printed or saved."""
    url = re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)
    return re.sub(r"(?i)(password=)[^&\s]*", r"\1***", url)


def storage_url(sweep: Sweep, override: str | None = None) -> str:
    url = override or os.environ.get(STORAGE_ENV) or sweep.storage
    if url and journal_path(url) is not None:
        return f"journal://{journal_path(url).resolve()}"  # absolute: workers and trials may start elsewhere
    if url and not re.match(r"^(sqlite|postgresql|mysql)(\+\w+)?://", url):
        raise ValueError(f"storage {redact(url)!r} is neither a database URL nor a journal file; use sqlite:///path/study.db "
                         "(one machine), postgresql://user@host/db (several), or journal:///shared/path/study.log (several "
                         "machines on a shared file system such as NFS)")
    return url or f"sqlite:///{(sweep.out_dir / 'study.db').resolve()}"


def make_storage(url: str, sweep: Sweep) -> optuna.storages.BaseStorage:
    retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY) if sweep.mode == "search" else None
    beat = {"heartbeat_interval": max(1, round(HEARTBEAT_S)), "grace_period": max(2, round(GRACE_S))}
    if journal_path(url) is not None:
        return JournalStudyStorage(journal_path(url), stale_callback=retry, **beat)
    kwargs: dict[str, Any] = {"engine_kwargs": {"connect_args": {"timeout": 60}}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(url, heartbeat_stale_trial_callback=retry, **beat, **kwargs)


def make_sampler(sweep: Sweep) -> optuna.samplers.BaseSampler:
    spec = dict(sweep.sampler)
    name, seed = spec.pop("name"), spec.pop("seed", None)
    if sweep.mode == "variants":
        # Rows are enqueued with fixed params and never sampled; the sampler only has to stay out of the way.
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler({k: s["choices"] for k, s in sweep.search.items()}, seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, **spec)
    return optuna.samplers.TPESampler(seed=seed, **spec)


def make_pruner(sweep: Sweep) -> optuna.pruners.BasePruner:
    spec = dict(sweep.pruner)
    name = spec.pop("name")
    return {
        "none": optuna.pruners.NopPruner,
        "median": optuna.pruners.MedianPruner,
        "successive_halving": optuna.pruners.SuccessiveHalvingPruner,
        "hyperband": optuna.pruners.HyperbandPruner,
    }[name](**spec)


def open_study(sweep: Sweep, url: str) -> optuna.Study:
    """Create or load the sweep's study; a storage that cannot be read is reported (and left untouched)."""
    import sqlalchemy.exc

    if url.startswith("sqlite"):
        sweep.out_dir.mkdir(parents=True, exist_ok=True)
    try:
        return optuna.create_study(
            study_name=sweep.name, storage=make_storage(url, sweep), direction=sweep.objective.direction,
            sampler=make_sampler(sweep), pruner=make_pruner(sweep), load_if_exists=True,
        )
    except sqlalchemy.exc.SQLAlchemyError as e:
        reason = redact(str(e.orig if getattr(e, "orig", None) else e).splitlines()[0])
        raise ValueError(f"cannot open the study '{sweep.name}' at {redact(url)}: {reason}; the storage was left as it is "
                         "(restore it from a backup, or give the sweep another out_dir or storage)") from None


def _row_of(t: FrozenTrial) -> tuple[str, int | None] | None:
    fixed = t.system_attrs.get("fixed_params") or {}
    return (fixed["row"], fixed.get("seed")) if "row" in fixed else None


BOOKKEEPING = "[not run] "  # fail_reason prefix of trials that never ran a row (duplicates, empty queue)


def _bookkeeping(t: FrozenTrial) -> bool:
    return str(t.user_attrs.get("fail_reason", "")).startswith(BOOKKEEPING)


def enqueue_rows(study: optuna.Study, sweep: Sweep, only_dead: bool = False) -> int:
    """Queue every (row, seed) with no finished, running or queued trial; returns how many were queued.

    With `only_dead`, only rows whose last trial died with its worker (failed by the heartbeat, so
    it has no fail_reason) are queued again, at most MAX_RETRY times: a row that fails by itself
    (NaN, bad override) is not retried within a run, only when the user re-runs the sweep.
    """
    trials = study.get_trials(deepcopy=False)
    busy = {_row_of(t) for t in trials
            if t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)}
    failed: dict[tuple, list[FrozenTrial]] = {}
    for t in trials:
        if t.state == TrialState.FAIL and _row_of(t) is not None and not _bookkeeping(t):
            failed.setdefault(_row_of(t), []).append(t)
    queued = 0
    for row, seed in sweep.rows():
        if (row, seed) in busy:
            continue
        if only_dead:
            history = failed.get((row, seed), [])
            dead = [t for t in history if "fail_reason" not in t.user_attrs]
            if not history or "fail_reason" in history[-1].user_attrs or len(dead) > MAX_RETRY:
                continue
        params = {"row": row} if seed is None else {"row": row, "seed": seed}
        study.enqueue_trial(params, user_attrs={"row": row, "seed": seed})
        queued += 1
    return queued


def _taken_elsewhere(study: optuna.Study, trial: optuna.Trial, key: tuple) -> str | None:
    """Another trial already finished this row, or started it before us: we must not run it too."""
    me = study._storage.get_trial(trial._trial_id)
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)):
        if t.number == me.number or _row_of(t) != key:
            continue
        if t.state == TrialState.COMPLETE or (t.datetime_start, t.number) < (me.datetime_start, me.number):
            return f"row {key[0]} (seed {key[1]}) is already {t.state.name.lower()} as trial {t.number}"
    return None


def _suggest(trial: optuna.Trial, key: str, spec: dict) -> Any:
    if spec["type"] == "categorical":
        return trial.suggest_categorical(key, spec["choices"])
    if spec["type"] == "int":
        return trial.suggest_int(key, int(spec["low"]), int(spec["high"]), step=int(spec.get("step") or 1), log=bool(spec.get("log")))
    return trial.suggest_float(key, float(spec["low"]), float(spec["high"]), step=spec.get("step"), log=bool(spec.get("log")))


def metric_value(summary: dict, name: str) -> float:
    if summary.get("best", {}).get("metric") == name and summary["best"].get("value") is not None:
        return float(summary["best"]["value"])
    if name in summary.get("last", {}):
        return float(summary["last"][name])
    if name in summary:
        return float(summary[name])
    raise KeyError(f"metric '{name}' is not in the run summary (known: {sorted(summary.get('last', {})) + [k for k in summary if '/' in k]})")


def objective_value(sweep: Sweep, summary: dict) -> float:
    return sum(w * metric_value(summary, m) for m, w in sweep.objective.terms.items())


def tell(study: optuna.Study, trial: optuna.Trial, value: float | None = None, state: TrialState | None = None) -> None:
    """study.tell, tolerating GridSampler's study.stop() after the last grid point, which raises outside
    optimize(); the result is stored before that (Optuna saves the state in a `finally`)."""
    try:
        study.tell(trial, value, state=state)
    except RuntimeError as e:
        if "Study.stop" not in str(e):
            raise


def grid_size(sweep: Sweep) -> int | None:
    """Points of a grid search (every parameter categorical), which bound its trials; None for other samplers."""
    if sweep.mode != "search" or sweep.sampler["name"] != "grid":
        return None
    size = 1
    for spec in sweep.search.values():
        size *= len(spec["choices"])
    return size


def _next_action(study: optuna.Study, sweep: Sweep, started: float) -> str:
    """'run' a trial, 'wait' for running ones (one may die and need a retry), or 'stop'."""
    if sweep.timeout and time.time() - started > sweep.timeout:
        return "stop"
    trials = study.get_trials(deepcopy=False)
    running = sum(t.state == TrialState.RUNNING for t in trials)
    if sweep.mode == "variants":
        if any(t.state == TrialState.WAITING for t in trials):
            return "run"
        return "wait" if running else "stop"
    budget = min(n for n in (sweep.n_trials, grid_size(sweep)) if n) if (sweep.n_trials or grid_size(sweep)) else None
    if budget:
        # Finished trials use up the budget, failed ones too (as in Optuna's optimize), except those failed by a
        # dead worker (re-queued by the retry callback) and bookkeeping ones that never ran.
        done = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                   or (t.state == TrialState.FAIL and "fail_reason" in t.user_attrs and not _bookkeeping(t)) for t in trials)
        if done >= budget:
            return "stop"
        if done + running >= budget:
            return "wait"
    return "run"


class _Stop:
    """SIGTERM/SIGUSR1 to a worker (a preempted job): pass it to the running trial, which saves a checkpoint and
    exits (PREEMPTED_EXIT); the trial is then failed without a reason, so its row runs again, and the worker stops."""

    requested = False
    child: subprocess.Popen | None = None

    @classmethod
    def handler(cls, signum, frame) -> None:
        cls.requested = True
        if cls.child is not None and cls.child.poll() is None:
            cls.child.send_signal(signal.SIGTERM)


def run_worker(sweep: Sweep, url: str, index: int = 0) -> None:
    """Take trials from the study until the budget is spent and no running trial could still need a retry."""
    study = open_study(sweep, url)
    started = time.time()
    for signum in (signal.SIGTERM, signal.SIGUSR1):
        signal.signal(signum, _Stop.handler)
    while True:
        if _Stop.requested:
            _say(index, "stopped by a signal; re-run the sweep to continue")
            return
        optuna.storages.fail_stale_trials(study)  # trials of dead workers -> FAIL (search: re-queued by the retry callback)
        if sweep.mode == "variants":
            enqueue_rows(study, sweep, only_dead=True)
        action = _next_action(study, sweep, started)
        if action == "stop":
            _say(index, "no trials left; stopping")
            return
        if action == "wait":
            time.sleep(HEARTBEAT_S)
            continue
        trial = None
        try:
            with _claim_lock(url):
                trial = study.ask()
                study._storage.record_heartbeat(trial._trial_id)  # from now on a dead worker's trial goes stale
                trial.set_user_attr("worker", index)
        except BaseException:
            if trial is not None:  # interrupted between claiming and the first heartbeat: never leave it RUNNING
                tell(study, trial, state=TrialState.FAIL)
            raise
        if sweep.mode == "variants" and "fixed_params" not in study._storage.get_trial_system_attrs(trial._trial_id):
            # Another worker took the last queued row between our check and ask().
            trial.set_user_attr("fail_reason", BOOKKEEPING + "no queued row left (taken by another worker)")
            tell(study, trial, state=TrialState.FAIL)
            continue
        try:
            run_trial(study, trial, sweep, url, index)
        except optuna.exceptions.UpdateFinishedTrialError:
            # Our heartbeat went stale (e.g. the machine was suspended) and the trial was failed and
            # retried elsewhere; its result is not recorded twice.
            _say(index, f"trial {trial.number} was already failed by its stale heartbeat; result dropped")
        except Exception as e:  # anything else fails this trial, not the worker
            _say(index, f"trial {trial.number} failed in the worker: {type(e).__name__}: {redact(str(e))[:300]}")
            try:
                trial.set_user_attr("fail_reason", f"{type(e).__name__}: {redact(str(e))}"[:500])
                tell(study, trial, state=TrialState.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:
                pass


@contextlib.contextmanager
def _claim_lock(url: str):
    """Serialise taking a queued trial between processes on one SQLite file.

    Optuna claims a WAITING trial with SELECT ... FOR UPDATE, which PostgreSQL and MySQL honour but
    SQLite ignores, so two local workers could both take the same trial. A file lock next to the
    database closes that race (SQLite studies are single-machine anyway).
    """
    if not url.startswith("sqlite:///"):
        yield
        return
    with open(url[len("sqlite:///"):] + ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _say(index: int, msg: str) -> None:
    print(f"[worker {index}] {msg}", file=sys.stderr, flush=True)


def _trial_overrides(study: optuna.Study, trial: optuna.Trial, sweep: Sweep) -> tuple[str, dict, int | None, list[str]]:
    if sweep.mode == "variants":
        # The row rides in the enqueued trial's fixed params, not as an Optuna param: a categorical param
        # would pin the list of rows, and adding a row to the sweep file would then break resuming.
        fixed = study._storage.get_trial_system_attrs(trial._trial_id)["fixed_params"]
        row, seed = fixed["row"], fixed.get("seed")
        if row not in sweep.variants:
            raise KeyError(f"row '{row}' was queued but is no longer in {sweep.path}")
        name = row if seed is None else f"{row}-s{seed}"
        tags = [row, row_group(row)] + ([f"seed{seed}"] if seed is not None else [])
        return name, dict(sweep.variants[row]), seed, tags
    overrides = {k: _suggest(trial, k, spec) for k, spec in sweep.search.items()}
    return f"trial{trial.number}", overrides, None, ["search"]


def run_trial(study: optuna.Study, trial: optuna.Trial, sweep: Sweep, url: str, index: int) -> TrialState:
    try:
        name, overrides, seed, tags = _trial_overrides(study, trial, sweep)
    except KeyError as e:
        trial.set_user_attr("fail_reason", str(e))
        tell(study, trial, state=TrialState.FAIL)
        return TrialState.FAIL
    if sweep.mode == "variants":
        clash = _taken_elsewhere(study, trial, (trial.user_attrs["row"], seed))
        if clash:
            trial.set_user_attr("fail_reason", BOOKKEEPING + f"duplicate: {clash}")
            tell(study, trial, state=TrialState.FAIL)
            return TrialState.FAIL
    root = (sweep.out_dir / "trials").resolve()
    fresh = root / f"{trial.number:04d}-{safe_name(name)}"
    assert fresh.parent == root  # safe_name() keeps every trial inside the sweep's out_dir
    previous = _continuable(study, trial, sweep, seed, root)
    trial_dir = Path(previous.user_attrs["out_dir"]) if previous is not None else fresh
    extra = {
        "logging.group": sweep.name, "logging.name": name, "logging.tags": tags, "logging.progress": False,
        "sweep.study": sweep.name, "sweep.row": trial.user_attrs.get("row", name), "sweep.trial": trial.number,
    }
    if sweep.gpus_per_trial > 1:
        extra.update({"train.devices": sweep.gpus_per_trial, "train.strategy": "ddp"})
    trial.set_user_attr("name", name)
    try:
        from ablate.config import to_yaml

        cfg = sweep.config_for(overrides, seed, trial_dir, extra)
        if previous is not None and _config_changed(trial_dir, cfg):
            _say(index, f"trial {trial.number} ({name}): the row's config changed since trial {previous.number}; starting over")
            previous, trial_dir = None, fresh
            cfg = sweep.config_for(overrides, seed, trial_dir, extra)
        trial_dir.mkdir(parents=True, exist_ok=True)
        (trial_dir / "trial.yaml").write_text(to_yaml(cfg))
    except Exception as e:  # a bad sampled override: fail this trial, keep sweeping
        trial.set_user_attr("fail_reason", f"{type(e).__name__}: {e}"[:500])
        tell(study, trial, state=TrialState.FAIL)
        return TrialState.FAIL
    trial.set_user_attr("out_dir", str(trial_dir))
    if previous is not None:
        trial.set_user_attr("continues", previous.number)
    _say(index, f"trial {trial.number} ({name}) " + (f"continues trial {previous.number} from its last checkpoint in {trial_dir}"
                                                      if previous is not None else f"started in {trial_dir}"))
    began = time.time()
    rc = _run_child(study, trial, sweep, url, trial_dir, resume=previous is not None)
    state = _finish(study, trial, sweep, trial_dir, rc)
    reason = study._storage.get_trial_user_attrs(trial._trial_id).get("fail_reason", "") if state == TrialState.FAIL else ""
    _say(index, f"trial {trial.number} ({name}) {state.name} after {time.time() - began:.0f} s {reason}".rstrip())
    return state


def _die_with_parent() -> None:
    """Linux: the trial process gets SIGKILL when its worker dies, so no orphan keeps training."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _continuable(study: optuna.Study, trial: optuna.Trial, sweep: Sweep, seed: int | None, root: Path) -> FrozenTrial | None:
    """The earlier attempt this trial should continue rather than start over: the last trial of the same row (in a
    search, the trial Optuna's retry callback re-queued) that stopped with no reason of its own (its worker died, or
    it was preempted), whose run directory holds a readable checkpoint and no live training process."""
    if sweep.mode == "variants":
        key = (trial.user_attrs["row"], seed)
        earlier = [t for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
                   if t.number < trial.number and _row_of(t) == key and not _bookkeeping(t)]
    else:
        retried = study._storage.get_trial_system_attrs(trial._trial_id).get("failed_trial")
        earlier = [study._storage.get_trial(study._storage.get_trial_id_from_study_id_trial_number(study._study_id, retried))] if retried is not None else []
    if not earlier:
        return None
    last = max(earlier, key=lambda t: t.number)
    out_dir = Path(last.user_attrs.get("out_dir", ""))
    if "fail_reason" in last.user_attrs or out_dir.parent != root or not (out_dir / "checkpoints").is_dir():
        return None
    from ablate.train import resume_checkpoint, run_dir_in_use

    try:
        resume_checkpoint(out_dir)
    except ValueError:
        return None
    return None if run_dir_in_use(out_dir) else last


def _config_changed(run_dir: Path, cfg) -> bool:
    """Whether `cfg` differs from the run's saved config (an unreadable one counts as differing)."""
    import yaml

    from ablate.train import changes_from_saved_config

    try:
        return bool(changes_from_saved_config(run_dir, cfg))
    except (OSError, yaml.YAMLError, AttributeError):
        return True


def _run_child(study: optuna.Study, trial: optuna.Trial, sweep: Sweep, url: str, trial_dir: Path, resume: bool = False) -> int:
    env = {**os.environ, STORAGE_ENV: url, "ABLATE_STUDY_NAME": sweep.name, "ABLATE_TRIAL_ID": str(trial._trial_id),
           "ABLATE_SWEEP_FILE": str(sweep.path.resolve())}
    cmd = [sys.executable, "-m", "ablate.trial", str(trial_dir / "trial.yaml"), *(["--resume"] if resume else [])]
    with open(trial_dir / "train.log", "ab") as log:
        child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        _Stop.child = child
        storage = study._storage
        while True:
            try:
                return child.wait(timeout=HEARTBEAT_S)
            except subprocess.TimeoutExpired:
                if storage.get_trial(trial._trial_id).state != TrialState.RUNNING:
                    # Failed as stale (this machine was suspended, the DB unreachable) and retried elsewhere.
                    child.send_signal(signal.SIGTERM)
                    child.wait()
                    raise optuna.exceptions.UpdateFinishedTrialError(f"trial {trial.number} is no longer running")
                storage.record_heartbeat(trial._trial_id)
            except KeyboardInterrupt:
                child.send_signal(signal.SIGTERM)
                child.wait()
                raise


def _fail_reason(trial_dir: Path) -> str:
    log = (trial_dir / "train.log").read_text(errors="replace").strip().splitlines() if (trial_dir / "train.log").exists() else []
    errors = [line for line in log if re.match(r"^[\w.]*(Error|Exception|Interrupt)\b|^ablate\b.*error", line)]
    return (errors[-1] if errors else (log[-1] if log else "the trial process died without output"))[:500]


def _finish(study: optuna.Study, trial: optuna.Trial, sweep: Sweep, trial_dir: Path, rc: int) -> TrialState:
    summary_path = trial_dir / "summary.json"
    try:
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    except (OSError, ValueError):
        summary = None
    if summary:
        for key in ("wall_seconds", "speed/tokens_per_s", "speed/step_ms", "speed/peak_mem_mb"):
            if key in summary:
                trial.set_user_attr(key, summary[key])
        trial.set_user_attr("params", summary["params"]["total"])
        for key, value in summary.get("last", {}).items():
            trial.set_user_attr(key, value)
    if rc == 0 and summary:
        try:
            value = objective_value(sweep, summary)
        except KeyError as e:
            trial.set_user_attr("fail_reason", str(e))
            tell(study, trial, state=TrialState.FAIL)
            return TrialState.FAIL
        if not math.isfinite(value):
            trial.set_user_attr("fail_reason", f"the objective is {value}")
            tell(study, trial, state=TrialState.FAIL)
            return TrialState.FAIL
        tell(study, trial, value)
        return TrialState.COMPLETE
    if rc == PRUNED_EXIT:
        tell(study, trial, state=TrialState.PRUNED)
        return TrialState.PRUNED
    if rc == PREEMPTED_EXIT:  # stopped by a preemption signal: failed without a reason, so its row is queued again
        trial.set_user_attr("preempted", True)
        tell(study, trial, state=TrialState.FAIL)
        return TrialState.FAIL
    trial.set_user_attr("fail_reason", redact(f"exit code {rc}: {_fail_reason(trial_dir)}"))
    tell(study, trial, state=TrialState.FAIL)
    return TrialState.FAIL
