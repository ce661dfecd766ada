"""A running trial that was never beaten is failed as stale once a watcher has seen it so for the grace period, on a
SQLite study and on a journal; one that is beaten, or beaten in time, is not."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from ablate.sweep import unbeaten
from ablate.sweep.journal import JournalStudyStorage
from ablate.sweep.storage import GRACE_S, HEARTBEAT_S, make_storage
from ablate.sweep.unbeaten import RDBStudyStorage, UnbeatenWatch

GRACE = 20  # seconds; the watcher's clock is moved by hand


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(unbeaten.time, "monotonic", lambda: now[0])
    return now


def test_the_watch_counts_from_its_first_sight_and_forgets_a_trial_beaten_meanwhile(clock):
    watch = UnbeatenWatch(GRACE)
    assert watch.stale([1, 2]) == []
    clock[0] += GRACE / 2
    assert watch.stale([1, 2, 3]) == []
    clock[0] += GRACE / 2 + 1
    assert watch.stale([1, 3]) == [1]  # 2 was beaten (or finished); 3 was first seen half a grace ago
    assert watch.stale([2]) == []  # unbeaten again: counted from now, not from its first sight
    clock[0] += GRACE + 1
    assert watch.stale([2, 3]) == [2]  # 3 was beaten (absent) a moment ago


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_claimed_trial_never_beaten_goes_stale_and_a_beaten_one_does_not(tmp_path, clock, kind):
    storage = make_storage(f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else f"journal://{tmp_path / 'study.log'}")
    assert isinstance(storage, RDBStudyStorage if kind == "sqlite" else JournalStudyStorage)
    study = optuna.create_study(study_name="s", storage=storage)
    orphan, beaten = study.ask(), study.ask()  # the first one's claimer died before its first beat
    storage.record_heartbeat(beaten._trial_id)
    optuna.storages.fail_stale_trials(study)
    beat = max(1, round(HEARTBEAT_S))  # a journal waits 18 beats, past NFS's directory attribute cache (60 s)
    wait = GRACE_S if kind == "sqlite" else max(GRACE_S, 18 * beat)
    clock[0] += wait - 1
    optuna.storages.fail_stale_trials(study)
    assert [t.state for t in study.get_trials()] == [TrialState.RUNNING, TrialState.RUNNING]
    clock[0] += 2
    optuna.storages.fail_stale_trials(study)
    assert [t.state for t in study.get_trials()] == [TrialState.FAIL, TrialState.RUNNING]
    assert orphan.number == 0 and beaten.number == 1
