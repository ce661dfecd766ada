"""Journal-file studies (ablate.journal): URLs, heartbeats that fail a dead worker's trial, damaged lines that
are reported with their file and line, the file left byte for byte as it was, and another worker's append in
progress, which is neither an error nor written onto."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import optuna
import pytest
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock, JournalStorage
from optuna.trial import TrialState

from ablate.sweep.journal import JournalStudyStorage, check_journal, journal_path
from ablate.sweep.load import load_sweep
from ablate.sweep.storage import storage_url
from ablate.sweep.worker import open_sweep_study

SWEEP = "name: demo\nbase: base.yaml\nvariants: {base: {}, A-h1: {model.heads: 1}}\n"


def sweep_file(tmp_path: Path, storage: str) -> Path:
    (tmp_path / "base.yaml").write_text("model: {d_model: 64, heads: 4, d_ff: 128}\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP + f"out_dir: {tmp_path}/out\nstorage: '{storage}'\n")
    return path


def study_with_trials(tmp_path: Path) -> tuple[Path, optuna.Study]:
    """A journal holding one finished trial and one running one."""
    log = tmp_path / "shared" / "study.log"
    sweep = load_sweep(sweep_file(tmp_path, f"journal://{log}"))
    study = open_sweep_study(sweep, storage_url(sweep.out_dir, sweep.storage)).study
    done = study.ask()
    study.tell(done, 1.0)
    study.ask()
    return log, study


def test_journal_urls_resolve_to_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert journal_path("journal:///srv/nfs/study.log") == Path("/srv/nfs/study.log")
    assert journal_path("sqlite:///x.db") is None
    sweep = load_sweep(sweep_file(tmp_path, "journal:runs/study.log"))
    assert storage_url(sweep.out_dir, sweep.storage) == f"journal://{tmp_path}/runs/study.log"  # workers and trials may start elsewhere


def test_a_running_trial_whose_heartbeat_stopped_is_failed_and_a_beating_one_is_not(tmp_path):
    log = tmp_path / "study.log"
    storage = JournalStudyStorage(log, heartbeat_interval=1, grace_period=60)  # a loaded machine's stall is no death
    study = optuna.create_study(study_name="hb", storage=storage)
    dead, alive, silent = study.ask(), study.ask(), study.ask()
    for t in (dead, alive):
        storage.record_heartbeat(t._trial_id)
    beat = log.with_name("study.log.heartbeats") / str(dead._trial_id)
    long_ago = time.time() - 600
    os.utime(beat, (long_ago, long_ago))  # its worker stopped beating ten minutes ago
    optuna.storages.fail_stale_trials(study)
    states = {t.number: t.state for t in study.get_trials()}
    assert states == {dead.number: TrialState.FAIL, alive.number: TrialState.RUNNING, silent.number: TrialState.RUNNING}
    assert not beat.exists()  # a finished trial's heartbeat file is removed
    # Another process reading the same file sees the same states (the journal, not memory, holds them).
    other = JournalStorage(JournalFileBackend(str(log)))
    assert [t.state for t in other.get_all_trials(0)] == [TrialState.FAIL, TrialState.RUNNING, TrialState.RUNNING]


@pytest.mark.parametrize("where", ["middle", "last"])
@pytest.mark.parametrize("damage", ["truncated JSON", "invalid UTF-8", "not an operation"])
def test_a_damaged_journal_line_is_reported_with_its_number_and_the_file_is_untouched(tmp_path, where, damage):
    log, _ = study_with_trials(tmp_path)
    lines = log.read_bytes().splitlines(keepends=True)
    bad = {
        "truncated JSON": lines[2][: len(lines[2]) // 2] + b"\n",
        "invalid UTF-8": b'{"op_code": 4, "x": "\xff\xfe"}\n',
        "not an operation": b"[1, 2, 3]\n",
    }[damage]
    number = 3 if where == "middle" else len(lines)
    lines[number - 1] = bad
    log.write_bytes(b"".join(lines))
    before = log.read_bytes()
    if where == "last" and damage == "truncated JSON":
        # Optuna on its own drops a damaged last line (here: creating the second trial) without a word.
        assert len(JournalStorage(JournalFileBackend(str(log))).get_all_trials(0)) == 1
    sweep = load_sweep(tmp_path / "sweep.yaml")
    with pytest.raises(ValueError, match=rf"study\.log, line {number}: damaged study journal"):
        open_sweep_study(sweep, storage_url(sweep.out_dir, sweep.storage))
    assert log.read_bytes() == before


def test_a_line_damaged_while_a_sweep_runs_is_reported_by_the_next_read(tmp_path):
    log, study = study_with_trials(tmp_path)
    with open(log, "ab") as f:  # written by something else after the study was opened
        f.write(b'{"op_code": 5, "trial_id"\n')
        f.write(json.dumps({"op_code": 6, "worker_id": "x", "trial_id": 0, "key": "a", "value": 1}).encode() + b"\n")
    with pytest.raises(ValueError, match=r"study\.log, line \d+: damaged study journal"):
        study.get_trials()


def test_a_torn_last_line_is_an_append_in_progress_that_readers_skip_and_writers_wait_for(tmp_path):
    """Another worker holds the journal's lock and has written half its line: a reader counts the whole lines only, and
    the sweep's own append (opening the study logs one) waits for the lock and goes after the finished line."""
    log, _ = study_with_trials(tmp_path)
    n = check_journal(log)
    op = json.dumps({"op_code": 8, "worker_id": "other", "trial_id": 1, "user_attr": {"note": "x"}}).encode() + b"\n"
    lock = JournalFileSymlinkLock(str(log))
    assert lock.acquire()
    with open(log, "ab") as f:
        f.write(op[:20])
    assert check_journal(log) == n
    sweep = load_sweep(tmp_path / "sweep.yaml")
    with ThreadPoolExecutor(1) as pool:
        opening = pool.submit(open_sweep_study, sweep, storage_url(sweep.out_dir, sweep.storage))
        time.sleep(0.5)
        assert not opening.done()  # waiting for the other worker's lock
        with open(log, "ab") as f:
            f.write(op[20:])
        lock.release()
        study = opening.result(timeout=60).study
    assert check_journal(log) == n + 2  # the other worker's line, then the opening's
    assert study.get_trials()[1].user_attrs == {"note": "x"}
