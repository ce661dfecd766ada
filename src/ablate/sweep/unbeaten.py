"""Running trials that were never beaten: stale once a watcher has seen them so for the grace period.

Optuna (and ablate's journal storage after it) never calls a RUNNING trial without any heartbeat stale, so such a
trial waited on forever: every later `ablate sweep` of its study hung, saying "running 1". A worker killed between
claiming a trial and its first beat leaves one (on any storage), and so does a journal cut back or restored to a
line before the trial's end while its heartbeat file, removed at that end, stays gone.

A claimer beats its trial within milliseconds of taking it, so a watcher (every worker checks for stale trials at
each beat) counts how long it has itself seen a trial unbeaten, by its own monotonic clock, and calls it stale past
the grace period. Nothing is written for it: a first beat recorded by the watcher would race the claimer's own
(a server's unique heartbeat row, a journal's heartbeat file removed at the trial's end).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import optuna
import sqlalchemy
from optuna.storages._rdb import models  # not re-exported: the heartbeat table Optuna's own stale check reads
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import TrialState


class UnbeatenWatch:
    """Since when this process has seen each running trial without a heartbeat."""

    def __init__(self, grace_s: float):
        self._grace, self._since = grace_s, {}

    def stale(self, unbeaten: Iterable[int]) -> list[int]:
        """Of the trials unbeaten now, those seen unbeaten for longer than the grace period."""
        now = time.monotonic()
        self._since = {trial_id: self._since.get(trial_id, now) for trial_id in unbeaten}
        return [trial_id for trial_id, since in self._since.items() if now - since > self._grace]


class RDBStudyStorage(optuna.storages.RDBStorage):
    """Optuna's RDB storage whose stale trials include the running ones an UnbeatenWatch has seen unbeaten too long."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._unbeaten = UnbeatenWatch(self.grace_period)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        stale = super()._get_stale_trial_ids(study_id)
        with _create_scoped_session(self.scoped_session) as session:
            rows = (
                session.query(models.TrialModel.trial_id)
                .outerjoin(models.TrialHeartbeatModel, models.TrialHeartbeatModel.trial_id == models.TrialModel.trial_id)
                .filter(models.TrialModel.study_id == study_id, models.TrialModel.state == TrialState.RUNNING)
                .filter(models.TrialHeartbeatModel.trial_id.is_(None))
                .all()
            )
        return stale + self._unbeaten.stale(trial_id for (trial_id,) in rows)

    def silent_for(self, study_id: int) -> dict[int, float]:
        """Running trials last beaten longer ago than the grace period -> seconds since, by the database's clock
        (Optuna's stale check, with the ages, read only): `ablate status` and a live view show such a trial's worker
        gone; failing it is left to a sweep."""
        with _create_scoped_session(self.scoped_session) as session:
            now = session.execute(sqlalchemy.func.now()).scalar_one().replace(tzinfo=None)
            rows = (
                session.query(models.TrialModel.trial_id, models.TrialHeartbeatModel.heartbeat)
                .join(models.TrialHeartbeatModel, models.TrialHeartbeatModel.trial_id == models.TrialModel.trial_id)
                .filter(models.TrialModel.study_id == study_id, models.TrialModel.state == TrialState.RUNNING)
                .all()
            )
        ages = {trial_id: (now - beat.replace(tzinfo=None)).total_seconds() for trial_id, beat in rows}
        return {trial_id: age for trial_id, age in ages.items() if age > (self.grace_period or 2 * self.heartbeat_interval)}
