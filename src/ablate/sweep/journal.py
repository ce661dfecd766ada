"""Optuna journal-file storage for sweeps (`storage: journal:///shared/path/study.log`), made as safe as an RDB one.

A journal is an append-only file of JSON operations, the storage Optuna recommends on shared file systems
whose locks SQLite cannot trust (NFS). Two things it lacks are added here:

- Trial heartbeats, which a sweep needs to fail a dead worker's trial and rerun its row: a file per running
  trial beside the journal (`study.log.heartbeats/TRIAL_ID`), touched at every beat. A trial is stale when its
  file is older than the grace period by the file server's clock (compared with a probe file touched just now),
  so the machines' own clocks need not agree. A running trial with no file is stale once a watcher has seen it so
  for the grace period (ablate.sweep.unbeaten).
- A checked reader: Optuna skips a damaged last line without a word and raises a bare JSONDecodeError for one
  in the middle. Here any damaged line stops the sweep with its file and line number, and the file is never
  rewritten (a torn trailing line seen by a reader is another worker's append in progress and is left to Optuna).
- A checked writer: Optuna appends onto a damaged last line (gluing its operation to it, so every later read fails)
  and leaves half a line where a full disk cut its write short. Here an append, holding the journal's lock so that
  no other is in progress, refuses a last line that is not a whole operation, and a failed one cuts the file back
  to where it ended (a full disk: ablate.files.atomic.DiskFull).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from optuna.storages._heartbeat import BaseHeartbeat  # not re-exported; fail_stale_trials checks for it
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.storages.journal._file import get_lock_file  # not re-exported; the lock Optuna's own append takes
from optuna.trial import TrialState

from ablate.files.atomic import append
from ablate.sweep.unbeaten import UnbeatenWatch

SCHEME = "journal:"


def journal_path(url: str) -> Path | None:
    """journal:///abs/study.log or journal:relative/study.log -> the file; None for other URLs."""
    if not url.startswith(SCHEME):
        return None
    rest = url[len(SCHEME) :]
    return Path(rest[2:] if rest.startswith("//") else rest)


def check_journal(path: Path) -> int:
    """Raise naming the file and line if any complete line is not a journal operation; returns the line count."""
    if not path.exists():
        return 0
    with open(path, "rb") as f:
        lines = 0
        for number, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):
                break  # an append still being written by another worker
            lines = number
            if problem := _problem(line):
                raise _damaged(path, number, problem, line)
    return lines


def check_last_line(path: Path) -> None:
    """Raise naming the file and line if the journal's last line is not a whole operation. Called holding the lock
    every writer takes, so no append is in progress: a line without its newline was cut off (a crash, a full disk)."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        start, tail = end, b""
        while start > 0 and b"\n" not in tail[:-1]:  # back to the newline before the last line
            start = max(0, start - 65536)
            f.seek(start)
            tail = f.read(end - start)
    last = tail[tail.rfind(b"\n", 0, len(tail) - 1) + 1 :]
    if not last:
        return
    problem = "its last line is incomplete: a write cut off by a crash or a full disk" if not last.endswith(b"\n") else _problem(last)
    if problem:
        with open(path, "rb") as f:
            number = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b"")) + (not last.endswith(b"\n"))
        raise _damaged(path, number, problem, last)


def _problem(line: bytes) -> str | None:
    """Why a complete line is not a journal operation; None if it is one."""
    try:
        op = json.loads(line)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return str(e).splitlines()[0]
    return None if isinstance(op, dict) and "op_code" in op else "a JSON value but not an Optuna journal operation"


def _damaged(path: Path, number: int, problem: str, line: bytes) -> ValueError:
    shown = line[:80].decode("utf-8", errors="replace").rstrip()
    return ValueError(
        f"{path}, line {number}: damaged study journal ({problem}): {shown!r}. The file was left as it is; restore it "
        "from a backup, or delete that line in a copy and point the sweep's storage at the copy (the trials logged "
        "after it may then be incomplete)"
    )


def _touch(path: Path) -> None:
    path.touch()
    os.utime(path)  # touch() of an existing file may leave mtime alone on some file systems


class _CheckedBackend(JournalFileBackend):
    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        try:
            yield from super().read_logs(log_number_from)
        except ValueError:
            check_journal(Path(self._file_path))  # names the damaged line
            raise

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Optuna's append, under its lock, onto a whole last line only, and all or nothing (ablate.files.atomic.append)."""
        text = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs)
        with get_lock_file(self._lock):
            check_last_line(Path(self._file_path))
            append(self._file_path, text)


class JournalStudyStorage(JournalStorage, BaseHeartbeat):
    """A journal-file storage with Optuna's heartbeat interface, so `fail_stale_trials` works on it."""

    def __init__(
        self,
        path: Path,
        heartbeat_interval: int,
        grace_period: int,
        read_only: bool = False,
    ):
        path = Path(path)
        if not read_only:  # `ablate status` reads a journal that is there: no folder of its own made for it
            path.parent.mkdir(parents=True, exist_ok=True)
        check_journal(path)
        super().__init__(_CheckedBackend(str(path)))
        self._beats, self._read_only = path.with_name(path.name + ".heartbeats"), read_only
        if not read_only:
            self._beats.mkdir(exist_ok=True)
        self._interval, self._grace = heartbeat_interval, grace_period
        # A heartbeat file another machine just made may stay invisible here for NFS's directory attribute cache
        # (acdirmax, 60 s by default), so a missing one waits 18 beats (90 s at the default beat) before it counts.
        self._unbeaten = UnbeatenWatch(max(grace_period, 18 * heartbeat_interval))

    def record_heartbeat(self, trial_id: int) -> None:
        _touch(self._beats / str(trial_id))

    def _now(self) -> float:
        probe = self._beats / ".now"  # shared by every worker: a touch in between only moves "now" later
        if self._read_only:  # `ablate status` makes no file: the probe a worker made, else this machine's clock
            try:
                os.utime(probe)
                return probe.stat().st_mtime
            except OSError:
                return time.time()
        _touch(probe)
        return probe.stat().st_mtime

    def _beat_ages(self, study_id: int) -> tuple[dict[int, float], list[int]]:
        """(running trial id -> seconds since its heartbeat file was touched; the running trials that have none)."""
        now, ages, unbeaten = self._now(), {}, []
        for trial in self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            trial_id = self.get_trial_id_from_study_id_trial_number(study_id, trial.number)
            try:
                ages[trial_id] = now - (self._beats / str(trial_id)).stat().st_mtime
            except FileNotFoundError:
                unbeaten.append(trial_id)  # claimed this moment, or its claimer or heartbeat file is gone
        return ages, unbeaten

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        ages, unbeaten = self._beat_ages(study_id)
        return [trial_id for trial_id, age in ages.items() if age > self._grace] + self._unbeaten.stale(unbeaten)

    def silent_for(self, study_id: int) -> dict[int, float]:
        """Running trials last beaten longer ago than the grace period -> seconds since (read only, as
        ablate.sweep.unbeaten.RDBStudyStorage.silent_for): their worker is gone."""
        return {trial_id: age for trial_id, age in self._beat_ages(study_id)[0].items() if age > self._grace}

    def get_heartbeat_interval(self) -> int | None:
        return self._interval

    def get_heartbeat_stale_trial_callback(self) -> None:
        return None  # a stale trial's work is queued again by the sweep's plan (ablate.sweep.plan_base.Plan.queue)

    def set_trial_state_values(self, trial_id: int, state: TrialState, values=None) -> bool:
        changed = super().set_trial_state_values(trial_id, state, values)
        if changed and state.is_finished():
            (self._beats / str(trial_id)).unlink(missing_ok=True)
        return changed
