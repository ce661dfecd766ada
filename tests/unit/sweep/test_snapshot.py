"""How long a sweep has left (ablate.sweep.snapshot.time_left): running trials at their own ETA, waiting ones at the
finished trials' mean as workers free up, and the counts line that says it."""

from __future__ import annotations

from ablate.sweep.picture import counts_line
from ablate.sweep.snapshot import Snapshot, TrialView, time_left


def _left(running: list[tuple[float | None, bool]], waiting: int, walls: list[float]) -> Snapshot:
    """A snapshot of trials running with these (ETA, ETA is a bound) and `waiting` queued, after finished ones took `walls`."""
    snap = Snapshot("s", "maximize", counts={"waiting": waiting})
    snap.trials = [TrialView(i, f"r{i}", "training", eta_s=eta, eta_upper=upper) for i, (eta, upper) in enumerate(running)]
    snap.left_s, snap.left_bound, snap.left_capped = time_left(snap, walls)
    return snap


def test_the_study_is_never_said_to_end_before_a_running_trial_s_own_eta():
    """The reported case: "about 1m17s left" beside a trial's "ETA 6m44s". A trial whose ETA runs to max_steps keeps
    it whole (the finished trials' mean no longer caps it), and waiting trials start as running ones end, rather than
    the work being spread evenly over the workers."""
    snap = _left([(30.0, False), (404.0, False)], waiting=2, walls=[100.0])  # the old estimate: (2*100 + 30 + 100) / 2 = 165 s
    assert snap.left_s == 404.0  # the waiting two run after the 30 s one, ending at 130 and 230 s
    assert counts_line(snap).endswith("waiting 2; about 6m44s left at 2 at a time")
    snap = _left([(30.0, False), (60.0, False)], waiting=3, walls=[100.0])
    assert snap.left_s == 230.0  # one worker 30 -> 130 -> 230, the other 60 -> 160: each waiting trial where one frees first


def test_a_bound_eta_beyond_the_mean_is_cut_to_it_and_the_line_says_so():
    """A "≤" ETA (a stopping rule may end the run sooner) past the finished trials' mean counts at that mean, named
    after the estimate; with only "≤" ETAs left and nothing waiting, the study's time is a bound too: "at most"."""
    snap = _left([(404.0, True), (50.0, False)], waiting=0, walls=[166.0])
    assert (snap.left_s, snap.left_bound, snap.left_capped) == (166.0, False, 166.0)
    assert counts_line(snap).endswith("; about 2m46s left at 2 at a time (a ≤ ETA counted at the finished trials' mean, 2m46s)")
    snap = _left([(120.0, True), (90.0, True)], waiting=0, walls=[166.0])
    assert (snap.left_s, snap.left_bound) == (120.0, True) and "; at most 2m00s left at 2 at a time" in counts_line(snap)
    assert _left([(120.0, True)], waiting=1, walls=[166.0]).left_bound is False  # a waiting trial's time is an estimate


def test_what_is_left_is_unknown_only_where_nothing_says():
    assert _left([(92.0, False)], waiting=0, walls=[]).left_s == 92.0  # no trial finished yet, but none waits either
    assert _left([(92.0, False)], waiting=1, walls=[]).left_s is None  # how long would the waiting one take?
    assert _left([(None, False)], waiting=0, walls=[]).left_s is None  # a trial still starting: no ETA yet
    assert _left([(None, False)], waiting=0, walls=[60.0]).left_s == 60.0  # ... counted at the mean once there is one
    assert _left([], waiting=2, walls=[60.0]).left_s == 120.0  # between trials: one at a time
    assert _left([], waiting=0, walls=[60.0]).left_s is None  # nothing left


def test_a_search_trial_retried_twice_is_continued_by_each_next_attempt():
    """Attempts 0 -> 1 -> 2 of one search trial: `failed_trial` names 0 on both retries, so attempt 1 read as still
    interrupted beside its running retry (counted twice); each is continued by the attempt that retries it."""
    import optuna
    from optuna.trial import TrialState, create_trial

    from ablate.sweep.snapshot import snapshot

    study = optuna.create_study()
    for n in range(3):
        history = list(range(n))
        system = {"failed_trial": 0, "retry_history": history} if history else {}
        state = TrialState.RUNNING if n == 2 else TrialState.FAIL
        study.add_trial(
            create_trial(state=state, params={"x": 1}, distributions={"x": optuna.distributions.IntDistribution(0, 2)}, system_attrs=system)
        )
    snap = snapshot(study)
    assert [(v.number, v.state, v.note) for v in snap.trials][:2] == [
        (0, "continued", "run again as trial 1"),
        (1, "continued", "run again as trial 2"),
    ]
    assert snap.counts["interrupted"] == 0


def test_a_copied_or_archived_study_reads_its_own_trials_progress(tmp_path):
    """The recorded out_dir is the original study's: status of a copy showed the original's step (30/30 for the copy's
    20/20), or none once the original was gone."""
    import optuna

    from ablate.run.progress_file import write_progress
    from ablate.sweep.snapshot import snapshot

    study = optuna.create_study(study_name="s")
    trial = study.ask()
    trial.set_user_attr("out_dir", str(tmp_path / "original" / "trials" / "0000-base"))
    study.tell(trial, 1.0)
    for where, step in (("original", 30), ("copy", 20)):
        (tmp_path / where / "trials" / "0000-base").mkdir(parents=True)
        write_progress(tmp_path / where / "trials" / "0000-base", {"phase": "finished", "step": step, "max_steps": step, "updated": 1.0})
    # a storage several sweeps share (the review's regression): this study's trials ran in an out_dir of their own,
    # with no database there, and are read where they ran, not from a same-named folder beside the database
    assert snapshot(study, now=2.0, root=tmp_path / "copy").trials[0].step == 30
    (tmp_path / "original" / "study.db").write_bytes(b"")  # the original study folder, with its own database
    assert snapshot(study, now=2.0, root=tmp_path / "copy").trials[0].step == 20
    assert snapshot(study, now=2.0, root=tmp_path / "original").trials[0].step == 30
    assert snapshot(study, now=2.0).trials[0].step == 30  # no folder given (a storage URL): what the trial recorded
    import shutil

    shutil.rmtree(tmp_path / "original")  # the original gone: the copy's own
    assert snapshot(study, now=2.0, root=tmp_path / "copy").trials[0].step == 20
